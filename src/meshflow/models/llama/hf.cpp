#include "meshflow/models/llama/spec.h"

#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/llama/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::llama {

namespace {

using json = nlohmann::ordered_json;

namespace {

const char* architecture(LlamaVariant v) {
  static const char* architectures[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"};
  return architectures[static_cast<int>(v)];
}

void read_rope_scaling(const json& j, const std::string& path, LlamaConfig& c) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return;
  const json& r = j["rope_scaling"];
  MF_CHECK(r.is_object(), path, ": \"rope_scaling\" must be an object or null");
  const std::string type = io::json_get(r, path, "rope_type", io::json_get(r, path, "type", std::string()));
  MF_CHECK(type == "llama3" || type == "default", path, ": rope_scaling type '", type,
           "' is not supported (meshflow computes \"llama3\" and \"default\")");
  if (type == "default") return;
  c.llama3_rope = true;
  c.rope_scaling.factor = io::json_get(r, path, "factor", 8.0);
  c.rope_scaling.low_freq_factor = io::json_get(r, path, "low_freq_factor", 1.0);
  c.rope_scaling.high_freq_factor = io::json_get(r, path, "high_freq_factor", 4.0);
  c.rope_scaling.original_max_position_embeddings = io::json_get(r, path, "original_max_position_embeddings", int64_t{8192});
}

// What meshflow's Llama does not compute, per class.
void check_supported(const json& j, const std::string& path, LlamaVariant v) {
  require_hf_string(j, path, "hidden_act", {"silu"}, "meshflow's Llama uses silu");
  MF_CHECK(!io::json_get(j, path, "mlp_bias", false), path, ": mlp_bias true is not supported");
  if (v == LlamaVariant::kLlama)
    MF_CHECK(!io::json_get(j, path, "attention_bias", false), path,
             ": attention_bias true (biases on q, k, v and o) is not supported");
  if (v == LlamaVariant::kQwen2)
    MF_CHECK(!io::json_get(j, path, "use_sliding_window", false), path,
             ": use_sliding_window true (Qwen2's per-layer windows) is not supported");
}

}  // namespace

LlamaConfig llama_config_from_hf(const std::string& path) {
  std::string type;
  const json j = read_hf_config(path, {"llama", "qwen2", "mistral"}, &type);
  LlamaConfig c;
  if (type == "qwen2") {
    c.variant = LlamaVariant::kQwen2;
    c.qkv_bias = true;
  } else if (type == "mistral") {
    c.variant = LlamaVariant::kMistral;
  }
  check_supported(j, path, c.variant);
  read_hf_fields(llama_schema(), j, path, c);
  if (c.head_dim == c.hidden_size / c.num_attention_heads) c.head_dim = 0;
  read_rope_scaling(j, path, c);
  if (c.variant == LlamaVariant::kMistral) c.sliding_window = io::json_get(j, path, "sliding_window", int64_t{0});
  return validated(std::move(c), path);
}

std::string llama_config_to_hf(const LlamaConfig& c, DType dtype) {
  const char* torch_dtype = io::torch_dtype_name(dtype);
  json j = {{"architectures", {architecture(c.variant)}},
            {"model_type", llama_variant_name(c.variant)},
            {"hidden_act", "silu"}};
  write_hf_fields(llama_schema(), c, j);
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.dim();
  j["rope_scaling"] = nullptr;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  if (c.llama3_rope)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  if (c.variant == LlamaVariant::kLlama) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  if (c.variant == LlamaVariant::kQwen2) j["use_sliding_window"] = false;
  if (c.variant == LlamaVariant::kMistral) j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_llama_tensors(const io::HfModelFiles& files, const LlamaConfig& c) {
  HfWeightRules r;
  r.rename = [](const std::string& name) {  // a buffer, recomputed from rope_theta
    return name.ends_with("rotary_emb.inv_freq") ? std::string() : name;
  };
  r.known = parameter_of(LlamaModel(c, ModelContext::shape_only()));
  if (c.tie_word_embeddings)
    r.tied["lm_head.weight"] = {"model.embed_tokens.weight", "model.embed_tokens.weight while tie_word_embeddings is true"};
  r.model = describe(c);
  return read_hf_weights(files, r);
}

}  // namespace

HfMapping hf(LlamaVariant variant) {
  HfMapping m = hf_mapping(llama_variant_name(variant), architecture(variant), &llama_config_from_hf,
                           &llama_config_to_hf, &read_hf_llama_tensors, &llama_config, llama_schema());
  m.key_names.insert(m.key_names.end(),
                     {{"model.rope_scaling.type", "rope_scaling.rope_type"},
                      {"model.rope_scaling.factor", "rope_scaling.factor"},
                      {"model.rope_scaling.low_freq_factor", "rope_scaling.low_freq_factor"},
                      {"model.rope_scaling.high_freq_factor", "rope_scaling.high_freq_factor"},
                      {"model.rope_scaling.original_max_position_embeddings", "rope_scaling.original_max_position_embeddings"},
                      {"model.sliding_window", "sliding_window"}});
  return m;
}

}  // namespace mf::models::llama
