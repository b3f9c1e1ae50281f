#include "meshflow/models/gpt2/config.h"

#include <algorithm>

#include "meshflow/ops/ops.h"

namespace mf::models {

DType Gpt2Config::activation_dtype(Device device) const { return native_half(device, dtype) ? dtype : compute_dtype(); }

bool Gpt2Config::checkpointed(int64_t layer) const {
  const int64_t end = checkpoint_end_layer < 0 ? num_layers : checkpoint_end_layer;
  return activation_checkpointing && layer >= checkpoint_start_layer && layer < end;
}

void Gpt2Config::validate() const {
  gpt2_schema().check(*this, "gpt2");
  MF_CHECK(hidden_size % num_attention_heads == 0, "gpt2: model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads);
  MF_CHECK(checkpoint_start_layer >= 0 && checkpoint_start_layer < num_layers,
           "gpt2: train.activation_checkpoint.start_layer ", checkpoint_start_layer, " must be in [0, model.num_layers = ",
           num_layers, ")");
  MF_CHECK(checkpoint_end_layer == -1 || (checkpoint_end_layer > checkpoint_start_layer && checkpoint_end_layer <= num_layers),
           "gpt2: train.activation_checkpoint.end_layer ", checkpoint_end_layer, " must be -1 (model.num_layers) or in (",
           "start_layer = ", checkpoint_start_layer, ", model.num_layers = ", num_layers, "]");
  MF_CHECK(head_chunk_elements > 0, "gpt2: head_chunk_elements ", head_chunk_elements, " must be positive");
  MF_CHECK(is_floating(dtype), "gpt2: the parameter dtype must be f32, f64, bf16 or f16, got ", dtype_name(dtype));
}

const Schema<Gpt2Config>& gpt2_schema() {
  using C = Gpt2Config;
  static const Schema<C> s = Schema<C>("gpt2")
      .transformer({.num_layers = "n_layer", .hidden_size = "n_embd", .num_attention_heads = "n_head",
                    .ffn_hidden_size = "n_inner", .max_seq_length = "n_positions",
                    .layernorm_epsilon = "layer_norm_epsilon", .embedding_dropout_prob = "embd_pdrop",
                    .attention_dropout_prob = "attn_pdrop", .output_dropout_prob = "resid_pdrop"})
      .at_least("model.ffn_hidden_size", 0);  // 0: 4 * hidden, as n_inner null
  return s;
}

Gpt2Config gpt2_config(const Config& c, int64_t tokenizer_vocab_size) {
  Gpt2Config g;
  gpt2_schema().read(c, g);
  g.vocab_size = std::max(g.vocab_size, tokenizer_vocab_size);
  const TrainingSettings s = training_settings(c);
  g.activation_checkpointing = s.recompute;
  g.checkpoint_granularity = s.granularity;
  g.checkpoint_start_layer = s.recompute_start_layer;
  g.checkpoint_end_layer = s.recompute_end_layer;
  g.dtype = s.dtype;
  g.validate();
  return g;
}

Config model_config(const Gpt2Config& g) { return gpt2_schema().write(g); }

std::string describe(const Gpt2Config& g) {
  return detail::cat("GPT-2: layers ", g.num_layers, ", hidden ", g.hidden_size, ", heads ", g.num_attention_heads,
                     ", MLP ", g.ffn(), ", vocabulary ", g.vocab_size, ", positions ", g.max_seq_length);
}


}  // namespace mf::models
