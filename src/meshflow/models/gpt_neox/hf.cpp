#include "meshflow/models/gpt_neox/spec.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/gpt_neox/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::gpt_neox {

namespace {

using json = nlohmann::ordered_json;

GptNeoxConfig gpt_neox_config_from_hf(const std::string& path) {
  const json j = read_hf_config(path, {"gpt_neox"});
  require_hf_string(j, path, "hidden_act", {"gelu"}, "meshflow's GPT-NeoX uses gelu");
  MF_CHECK(io::json_get(j, path, "attention_bias", true), path, ": attention_bias false is not supported");
  MF_CHECK(!j.contains("rope_scaling") || j["rope_scaling"].is_null(), path, ": rope_scaling is not supported");
  GptNeoxConfig c;
  read_hf_fields(gpt_neox_schema(), j, path, c);
  if (!j.contains("rotary_pct")) c.rotary_pct = io::json_get(j, path, "partial_rotary_factor", c.rotary_pct);  // newer files
  if (!j.contains("rotary_emb_base")) c.rope_theta = io::json_get(j, path, "rope_theta", c.rope_theta);
  return validated(std::move(c), path);
}

std::string gpt_neox_config_to_hf(const GptNeoxConfig& c, DType dtype) {
  json j = {{"architectures", {"GPTNeoXForCausalLM"}}, {"model_type", "gpt_neox"}, {"hidden_act", "gelu"},
            {"attention_bias", true}};
  write_hf_fields(gpt_neox_schema(), c, j);
  j["use_cache"] = true;
  j["torch_dtype"] = io::torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_gpt_neox_tensors(const io::HfModelFiles& files, const GptNeoxConfig& c) {
  HfWeightRules r;
  r.rename = [](const std::string& name) {
    // Buffers of older files: the causal mask, its fill value, the rotary frequencies.
    const bool buffer = name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias") ||
                        name.ends_with("rotary_emb.inv_freq");
    return buffer ? std::string() : name;
  };
  r.known = parameter_of(GptNeoxModel(c, ModelContext::shape_only()));
  r.model = describe(c);
  return read_hf_weights(files, r);
}

}  // namespace

HfMapping hf() {
  return hf_mapping("gpt_neox", "GPTNeoXForCausalLM", &gpt_neox_config_from_hf, &gpt_neox_config_to_hf,
                    &read_hf_gpt_neox_tensors, &gpt_neox_config, gpt_neox_schema());
}

}  // namespace mf::models::gpt_neox
