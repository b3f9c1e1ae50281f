#include "meshflow/models/t5/config.h"

#include <algorithm>

#include "meshflow/ops/ops.h"

namespace mf::models {

void T5Config::validate() const {
  t5_schema().check(*this, "t5");
  MF_CHECK(relative_attention_num_buckets >= 2 && relative_attention_max_distance > relative_attention_num_buckets / 2,
           "t5: model.relative_attention_num_buckets (", relative_attention_num_buckets,
           ") must be >= 2 and model.relative_attention_max_distance (", relative_attention_max_distance,
           ") above half of it");
  MF_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, "t5: model.pad_token_id ", pad_token_id,
           " is outside the vocabulary of ", vocab_size);
  settings.check("t5");
}

const Schema<T5Config>& t5_schema() {
  using C = T5Config;
  // dropout_rate (all three dropouts) is read by hand.
  static const Schema<C> s = Schema<C>("t5")
      .transformer({.num_layers = "num_layers", .hidden_size = "d_model", .num_attention_heads = "num_heads",
                    .ffn_hidden_size = "d_ff", .max_seq_length = "", .layernorm_epsilon = "layer_norm_epsilon",
                    .attention_dropout_prob = "", .output_dropout_prob = "dropout_rate"})
      .size("model.num_decoder_layers", &C::num_decoder_layers, "num_decoder_layers").positive()
      .structure("model.head_dim", &C::head_dim, "d_kv").positive()
      .structure("model.tie_word_embeddings", &C::tie_word_embeddings, "tie_word_embeddings")
      .structure("model.relative_attention_num_buckets", &C::relative_attention_num_buckets, "relative_attention_num_buckets")
      .structure("model.relative_attention_max_distance", &C::relative_attention_max_distance, "relative_attention_max_distance")
      .size("model.decoder_seq_length", &C::decoder_seq_length)
      .structure("model.pad_token_id", &C::pad_token_id, "pad_token_id")  // the decoder's start
      .size("model.initializer_factor", &C::initializer_factor, "initializer_factor").positive()
      .key("model.feed_forward_proj");
  return s;
}

T5Config t5_config(const Config& c, int64_t tokenizer_vocab_size) {
  T5Config m;
  m.mt5 = c.get_string("model.name") == "mt5";
  t5_schema().read(c, m);
  m.vocab_size = std::max(m.vocab_size, tokenizer_vocab_size);
  if (m.num_decoder_layers == 0) m.num_decoder_layers = m.num_layers;
  if (m.head_dim == 0) {
    MF_CHECK(m.num_attention_heads > 0 && m.hidden_size % m.num_attention_heads == 0, "t5: model.hidden_size ",
             m.hidden_size, " is not divisible by model.num_attention_heads ", m.num_attention_heads,
             " (or set model.head_dim)");
    m.head_dim = m.hidden_size / m.num_attention_heads;
  }
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  const std::string proj = c.get_string("model.feed_forward_proj");
  MF_CHECK(proj == "relu" || proj == "gated-gelu", "t5: model.feed_forward_proj '", proj,
           "' is not one of relu (T5 v1.0), gated-gelu (T5 v1.1, mT5)");
  m.gated_gelu = proj == "gated-gelu";
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config model_config(const T5Config& m) {
  Config y = t5_schema().write(m);
  y.set("model.name", m.mt5 ? "mt5" : "t5");
  y.set("model.feed_forward_proj", m.gated_gelu ? "gated-gelu" : "relu");
  return y;
}

std::string describe(const T5Config& m) {
  return detail::cat(m.mt5 ? "mT5 " : "T5 ", m.gated_gelu ? "v1.1 (gated-gelu" : "v1.0 (relu", m.tie_word_embeddings ? ", tied" : ", untied",
                     "): layers ", m.num_layers, "+", m.num_decoder_layers, ", hidden ", m.hidden_size, ", heads ",
                     m.num_attention_heads, " x ", m.head_dim, ", MLP ", m.ffn_hidden_size, ", vocabulary ", m.vocab_size,
                     ", lengths ", m.max_seq_length, "/", m.decoder_seq_length);
}

std::string t5_bias_table(bool decoder) {
  return std::string(decoder ? "decoder" : "encoder") + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight";
}


}  // namespace mf::models
