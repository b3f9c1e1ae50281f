#include "meshflow/models/mlp_lm/model.h"

#include <algorithm>

namespace mf::models {

const Schema<MlpLmConfig>& mlp_lm_schema() {
  static const Schema<MlpLmConfig> s = Schema<MlpLmConfig>("mlp_lm").transformer().at_least("model.ffn_hidden_size", 0);
  return s;
}

MlpLmConfig mlp_lm_config(const Config& c, int64_t tokenizer_vocab_size) {
  MlpLmConfig m;
  mlp_lm_schema().read(c, m);
  m.vocab_size = std::max(m.vocab_size, tokenizer_vocab_size);
  m.settings = training_settings(c);
  mlp_lm_schema().check(m, "mlp_lm");  // sizes >= 1 (ffn_hidden_size 0: 4 * hidden), dropouts in [0, 1)
  return m;
}

DecoderLmSpec decoder_spec(const MlpLmConfig& c) {
  layers::BlockSpec b{.mlp = {.hidden = c.hidden_size, .ffn = c.ffn(), .act = layers::Activation::kGeluTanh,
                              .weights = layers::WeightLayout::kConv1D, .up = "fc1", .down = "fc2"},
                      .norm = layers::NormKind::kLayerNorm, .norm_eps = c.layernorm_epsilon,
                      .dropout_p = c.output_dropout_prob, .norm2 = "norm",
                      .order = {layers::BlockPart::kNorm2, layers::BlockPart::kMlp}};
  DecoderLmSpec s;
  s.family = "mlp_lm";
  s.root = "";
  s.embed = "wte";
  s.final_norm = "norm";
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.num_layers = c.num_layers;
  s.max_seq_length = 0;  // no positions
  s.generates = false;
  s.tie_word_embeddings = true;
  s.embedding_dropout = c.embedding_dropout_prob;
  s.final_norm_kind = layers::NormKind::kLayerNorm;
  s.final_norm_eps = c.layernorm_epsilon;
  s.block = b;
  s.initializer_range = c.initializer_range;
  s.scaled_init = {"fc2.weight"};
  s.settings = c.settings;
  s.settings.granularity = CheckpointGranularity::kFull;  // no attention to recompute alone
  s.streams_per_layer = 1;                                 // the block's output dropout
  return s;
}

Config model_config(const MlpLmConfig& c) { return mlp_lm_schema().write(c); }

std::string describe(const MlpLmConfig& c) {
  return detail::cat("MLP LM: layers ", c.num_layers, ", hidden ", c.hidden_size, ", MLP ", c.ffn(), ", vocabulary ",
                     c.vocab_size);
}

}  // namespace mf::models
