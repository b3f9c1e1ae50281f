#include "meshflow/models/mlp_lm/model.h"

#include <algorithm>

namespace mf::models {

MlpLmConfig mlp_lm_config(const Config& c, int64_t tokenizer_vocab_size) {
  MlpLmConfig m;
  m.vocab_size = std::max(c.get_int("model.vocab_size"), tokenizer_vocab_size);
  m.hidden_size = c.get_int("model.hidden_size");
  m.ffn_hidden_size = c.get_int("model.ffn_hidden_size");
  m.num_layers = c.get_int("model.num_layers");
  m.embedding_dropout_prob = c.get_float("model.embedding_dropout_prob");
  m.output_dropout_prob = c.get_float("model.output_dropout_prob");
  m.layernorm_epsilon = c.get_float("model.layernorm_epsilon");
  m.initializer_range = c.get_float("model.initializer_range");
  m.settings = training_settings(c);
  MF_CHECK(m.vocab_size > 0 && m.hidden_size > 0 && m.ffn() > 0 && m.num_layers > 0, "mlp_lm: model sizes must be "
           "positive (vocab_size ", m.vocab_size, ", hidden_size ", m.hidden_size, ", ffn_hidden_size ", m.ffn(),
           ", num_layers ", m.num_layers, ")");
  for (double p : {m.embedding_dropout_prob, m.output_dropout_prob})
    MF_CHECK(p >= 0.0 && p < 1.0, "mlp_lm: dropout probabilities must be in [0, 1), got ", p);
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

Config model_config(const MlpLmConfig& c) {
  Config y;
  y.set("model.name", "mlp_lm");
  y.set("model.num_layers", std::to_string(c.num_layers));
  y.set("model.hidden_size", std::to_string(c.hidden_size));
  y.set("model.ffn_hidden_size", std::to_string(c.ffn_hidden_size));
  y.set("model.vocab_size", std::to_string(c.vocab_size));
  return y;
}

std::string describe(const MlpLmConfig& c) {
  return detail::cat("MLP LM: layers ", c.num_layers, ", hidden ", c.hidden_size, ", MLP ", c.ffn(), ", vocabulary ",
                     c.vocab_size);
}

}  // namespace mf::models
