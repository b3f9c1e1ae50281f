#include "meshflow/models/gpt_neox/hf.h"

#include <nlohmann/json.hpp>
#include <set>

#include "meshflow/io/safetensors.h"

namespace mf::models {

using json = nlohmann::ordered_json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <class T>
T get(const json& j, const std::string& path, const char* key, T fallback) {
  return io::json_get(j, path, key, fallback);
}

}  // namespace

GptNeoxConfig gpt_neox_config_from_hf(const std::string& path) {
  const json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  const std::string type = get(j, path, "model_type", std::string("gpt_neox"));
  MF_CHECK(type == "gpt_neox", path, ": model_type '", type, "' is not gpt_neox");
  const std::string act = get(j, path, "hidden_act", std::string("gelu"));
  MF_CHECK(act == "gelu", path, ": hidden_act '", act, "' is not supported (meshflow's GPT-NeoX uses gelu)");
  MF_CHECK(get(j, path, "attention_bias", true), path, ": attention_bias false is not supported");
  MF_CHECK(!j.contains("rope_scaling") || j["rope_scaling"].is_null(), path, ": rope_scaling is not supported");
  GptNeoxConfig c;
  c.vocab_size = get(j, path, "vocab_size", int64_t{50432});
  c.hidden_size = get(j, path, "hidden_size", int64_t{6144});
  c.ffn_hidden_size = get(j, path, "intermediate_size", int64_t{24576});
  c.num_layers = get(j, path, "num_hidden_layers", int64_t{44});
  c.num_attention_heads = get(j, path, "num_attention_heads", int64_t{64});
  c.max_seq_length = get(j, path, "max_position_embeddings", int64_t{2048});
  c.layernorm_epsilon = get(j, path, "layer_norm_eps", 1e-5);
  c.rotary_pct = get(j, path, "rotary_pct", get(j, path, "partial_rotary_factor", 0.25));
  c.rope_theta = get(j, path, "rotary_emb_base", get(j, path, "rope_theta", 10000.0));
  c.use_parallel_residual = get(j, path, "use_parallel_residual", true);
  c.tie_word_embeddings = get(j, path, "tie_word_embeddings", false);
  c.attention_dropout_prob = get(j, path, "attention_dropout", 0.0);
  c.output_dropout_prob = get(j, path, "hidden_dropout", 0.0);
  c.initializer_range = get(j, path, "initializer_range", 0.02);
  try {
    c.validate();
  } catch (const Error& e) {
    MF_THROW(path, ": ", e.what());
  }
  return c;
}

std::string gpt_neox_config_to_hf(const GptNeoxConfig& c, DType dtype) {
  json j = {{"architectures", {"GPTNeoXForCausalLM"}},
            {"model_type", "gpt_neox"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.ffn_hidden_size},
            {"num_hidden_layers", c.num_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"hidden_act", "gelu"},
            {"max_position_embeddings", c.max_seq_length},
            {"layer_norm_eps", c.layernorm_epsilon},
            {"rotary_pct", c.rotary_pct},
            {"rotary_emb_base", c.rope_theta},
            {"use_parallel_residual", c.use_parallel_residual},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"attention_bias", true},
            {"attention_dropout", c.attention_dropout_prob},
            {"hidden_dropout", c.output_dropout_prob},
            {"initializer_range", c.initializer_range},
            {"use_cache", true},
            {"torch_dtype", io::torch_dtype_name(dtype)}};
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_gpt_neox_tensors(const io::HfModelFiles& files, const GptNeoxConfig& c) {
  std::set<std::string> names;
  for (const auto& [name, shape] : gpt_neox_parameter_shapes(c)) names.insert(name);
  nn::NamedTensors out;
  for (const std::string& file : files.weights) {
    for (auto& [name, t] : io::load_safetensors(file).tensors) {
      // Buffers of older files: the causal mask, its fill value, the rotary frequencies.
      if (ends_with(name, ".attention.bias") || ends_with(name, ".attention.masked_bias") ||
          ends_with(name, "rotary_emb.inv_freq"))
        continue;
      MF_CHECK(names.count(name), file, ": unknown tensor '", name, "' (not a parameter of ", gpt_neox_describe(c), ")");
      out.emplace_back(name, t);
    }
  }
  return out;
}

}  // namespace mf::models
