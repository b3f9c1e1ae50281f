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
                                 .size("model.num_layers", &C::num_layers, "n_layer")
                                 .size("model.hidden_size", &C::hidden_size, "n_embd")
                                 .structure("model.num_attention_heads", &C::num_attention_heads, "n_head")
                                 .size("model.ffn_hidden_size", &C::ffn_hidden_size, "n_inner")  // 0: 4 * hidden, as n_inner null
                                 .size("model.max_seq_length", &C::max_seq_length, "n_positions")
                                 .size("model.vocab_size", &C::vocab_size, "vocab_size")
                                 .size("model.embedding_dropout_prob", &C::embedding_dropout_prob, "embd_pdrop")
                                 .size("model.attention_dropout_prob", &C::attention_dropout_prob, "attn_pdrop")
                                 .size("model.output_dropout_prob", &C::output_dropout_prob, "resid_pdrop")
                                 .structure("model.layernorm_epsilon", &C::layernorm_epsilon, "layer_norm_epsilon")
                                 .size("model.initializer_range", &C::initializer_range, "initializer_range");
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

Config gpt2_model_config(const Gpt2Config& g) { return gpt2_schema().write(g); }

std::string gpt2_describe(const Gpt2Config& g) {
  return detail::cat("GPT-2: layers ", g.num_layers, ", hidden ", g.hidden_size, ", heads ", g.num_attention_heads,
                     ", MLP ", g.ffn(), ", vocabulary ", g.vocab_size, ", positions ", g.max_seq_length);
}


}  // namespace mf::models
