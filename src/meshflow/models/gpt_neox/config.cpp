#include "meshflow/models/gpt_neox/config.h"

#include <algorithm>

namespace mf::models {

int64_t GptNeoxConfig::rotary_dims() const {
  return static_cast<int64_t>(static_cast<double>(dim()) * rotary_pct);
}

void GptNeoxConfig::validate() const {
  gpt_neox_schema().check(*this, "gpt_neox");
  MF_CHECK(hidden_size % num_attention_heads == 0, "gpt_neox: model.num_attention_heads ", num_attention_heads,
           " must divide model.hidden_size ", hidden_size);
  MF_CHECK(rotary_dims() >= 2 && rotary_dims() % 2 == 0, "gpt_neox: model.rotary_pct ", rotary_pct, " rotates ",
           rotary_dims(), " of a head's ", dim(), " features (an even number, at least 2, is needed)");
  settings.check("gpt_neox");
}

const Schema<GptNeoxConfig>& gpt_neox_schema() {
  using C = GptNeoxConfig;
  static const Schema<C> s = Schema<C>("gpt_neox")
      .transformer({.attention_dropout_prob = "attention_dropout", .output_dropout_prob = "hidden_dropout"})
      .structure("model.rotary_pct", &C::rotary_pct, "rotary_pct")
      .structure("model.rope_theta", &C::rope_theta, "rotary_emb_base")
      .structure("model.use_parallel_residual", &C::use_parallel_residual, "use_parallel_residual")
      .structure("model.tie_word_embeddings", &C::tie_word_embeddings, "tie_word_embeddings")
      .key("model.embedding_dropout_prob");
  return s;
}

GptNeoxConfig gpt_neox_config(const Config& c, int64_t tokenizer_vocab_size) {
  GptNeoxConfig m;
  gpt_neox_schema().read(c, m);
  m.vocab_size = std::max(m.vocab_size, tokenizer_vocab_size);
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  MF_CHECK(c.get_float("model.embedding_dropout_prob") == 0.0,
           "gpt_neox: model.embedding_dropout_prob must be 0 (GPT-NeoX has no embedding dropout)");
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config model_config(const GptNeoxConfig& m) {
  Config y = gpt_neox_schema().write(m);
  y.set("model.embedding_dropout_prob", "0.0");
  return y;
}

std::string describe(const GptNeoxConfig& m) {
  return detail::cat("GPT-NeoX: layers ", m.num_layers, ", hidden ", m.hidden_size, ", heads ", m.num_attention_heads,
                     ", MLP ", m.ffn_hidden_size, ", rotary ", m.rotary_dims(), " of ", m.dim(), ", ",
                     m.use_parallel_residual ? "parallel residual" : "sequential residual", ", vocabulary ", m.vocab_size,
                     ", positions ", m.max_seq_length);
}


}  // namespace mf::models
