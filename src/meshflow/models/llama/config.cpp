#include "meshflow/models/llama/config.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numbers>
#include <sstream>

#include "meshflow/ops/ops.h"

namespace mf::models {

const char* llama_variant_name(LlamaVariant v) {
  switch (v) {
    case LlamaVariant::kQwen2: return "qwen2";
    case LlamaVariant::kMistral: return "mistral";
    case LlamaVariant::kLlama: break;
  }
  return "llama";
}

std::vector<double> LlamaConfig::rope_inv_freq() const {
  const int64_t D = dim(), half = D / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[static_cast<size_t>(i)] = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  if (!llama3_rope) return f;
  // Llama 3.1: wavelengths longer than the original context / low_freq_factor are slowed down by
  // `factor`, shorter than context / high_freq_factor kept, those between interpolated.
  const Llama3RopeScaling& s = rope_scaling;
  const double context = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = context / s.low_freq_factor, high_wavelen = context / s.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2.0 * std::numbers::pi / x;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      x /= s.factor;
      continue;
    }
    const double smooth = (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    x = (1.0 - smooth) * x / s.factor + smooth * x;
  }
  return f;
}

void LlamaConfig::validate() const {
  const char* v = llama_variant_name(variant);
  llama_schema().check(*this, v);
  MF_CHECK(head_dim > 0 || hidden_size % num_attention_heads == 0, v, ": model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads, " (set model.head_dim)");
  MF_CHECK(dim() % 2 == 0, v, ": the head dimension ", dim(), " must be even (rotary embeddings rotate pairs)");
  MF_CHECK(num_attention_heads % kv_heads() == 0, v, ": model.num_key_value_heads ", kv_heads(),
           " must divide model.num_attention_heads ", num_attention_heads);
  if (llama3_rope) {
    const Llama3RopeScaling& s = rope_scaling;
    MF_CHECK(s.factor > 0.0 && s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor &&
                 s.original_max_position_embeddings > 0,
             v, ": model.rope_scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
             "original_max_position_embeddings > 0");
  }
  settings.check(v);
}

const Schema<LlamaConfig>& llama_schema() {
  using C = LlamaConfig;
  // sliding_window: config.json's only under Mistral (Qwen2's files hold one they do not use).
  static const Schema<C> s = Schema<C>("llama")
      .transformer({.layernorm_epsilon = "rms_norm_eps", .attention_dropout_prob = "attention_dropout"})
      .structure("model.num_key_value_heads", &C::num_key_value_heads, "num_key_value_heads")
      .structure("model.head_dim", &C::head_dim, "head_dim")
      .structure("model.rope_theta", &C::rope_theta, "rope_theta")
      .structure("model.tie_word_embeddings", &C::tie_word_embeddings, "tie_word_embeddings")
      .structure("model.qkv_bias", &C::qkv_bias)
      .structure("model.sliding_window", &C::sliding_window)
      .key("model.rope_scaling.type")
      .key("model.rope_scaling.factor")
      .key("model.rope_scaling.low_freq_factor")
      .key("model.rope_scaling.high_freq_factor")
      .key("model.rope_scaling.original_max_position_embeddings")
      .key("model.embedding_dropout_prob")
      .key("model.output_dropout_prob");
  return s;
}

LlamaConfig llama_config(const Config& c, int64_t tokenizer_vocab_size) {
  LlamaConfig m;
  const std::string name = c.get_string("model.name");
  m.variant = name == "qwen2" ? LlamaVariant::kQwen2 : name == "mistral" ? LlamaVariant::kMistral : LlamaVariant::kLlama;
  llama_schema().read(c, m);
  m.vocab_size = std::max(m.vocab_size, tokenizer_vocab_size);
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  const std::string scaling = c.get_string("model.rope_scaling.type");
  MF_CHECK(scaling.empty() || scaling == "llama3", name, ": model.rope_scaling.type '", scaling,
           "' is not supported (\"\" or llama3)");
  m.llama3_rope = scaling == "llama3";
  m.rope_scaling.factor = c.get_float("model.rope_scaling.factor");
  m.rope_scaling.low_freq_factor = c.get_float("model.rope_scaling.low_freq_factor");
  m.rope_scaling.high_freq_factor = c.get_float("model.rope_scaling.high_freq_factor");
  m.rope_scaling.original_max_position_embeddings = c.get_int("model.rope_scaling.original_max_position_embeddings");
  for (const char* key : {"model.embedding_dropout_prob", "model.output_dropout_prob"})
    MF_CHECK(c.get_float(key) == 0.0, name, ": ", key, " must be 0 (the Llama family has no such dropout; "
             "model.attention_dropout_prob is its only one)");
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config model_config(const LlamaConfig& m) {
  Config y = llama_schema().write(m);
  auto num = [](double v) {
    std::ostringstream os;
    os << std::setprecision(17) << v;
    return os.str();
  };
  y.set("model.name", llama_variant_name(m.variant));
  y.set("model.num_key_value_heads", std::to_string(m.kv_heads()));
  y.set("model.rope_scaling.type", m.llama3_rope ? "llama3" : "");
  y.set("model.rope_scaling.factor", num(m.rope_scaling.factor));
  y.set("model.rope_scaling.low_freq_factor", num(m.rope_scaling.low_freq_factor));
  y.set("model.rope_scaling.high_freq_factor", num(m.rope_scaling.high_freq_factor));
  y.set("model.rope_scaling.original_max_position_embeddings", std::to_string(m.rope_scaling.original_max_position_embeddings));
  y.set("model.embedding_dropout_prob", "0.0");
  y.set("model.output_dropout_prob", "0.0");
  return y;
}

std::string describe(const LlamaConfig& m) {
  static const char* names[] = {"Llama", "Qwen2", "Mistral"};
  std::string s = detail::cat(names[static_cast<int>(m.variant)], ": layers ", m.num_layers, ", hidden ", m.hidden_size,
                              ", heads ", m.num_attention_heads, " (kv ", m.kv_heads(), "), MLP ", m.ffn_hidden_size,
                              ", vocabulary ", m.vocab_size, ", positions ", m.max_seq_length);
  if (m.sliding_window > 0) s += detail::cat(", window ", m.sliding_window);
  return s;
}


}  // namespace mf::models
