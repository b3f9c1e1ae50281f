#include "meshflow/models/vit/spec.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/vit/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::vit {

namespace {

using json = nlohmann::ordered_json;

VitConfig vit_config_from_hf(const std::string& path) {
  const json j = read_hf_config(path, {"vit"});
  require_hf_string(j, path, "hidden_act", {"gelu"}, "meshflow's ViT uses gelu, the erf form");
  MF_CHECK(io::json_get(j, path, "qkv_bias", true), path, ": qkv_bias false is not supported");
  VitConfig c;
  read_hf_fields(vit_schema(), j, path, c);
  c.num_labels = j.contains("id2label") && j["id2label"].is_object() ? static_cast<int64_t>(j["id2label"].size())
                                                                      : io::json_get(j, path, "num_labels", 2);
  c.embedding_dropout_prob = c.output_dropout_prob;  // hidden_dropout_prob
  return validated(std::move(c), path);
}

std::string vit_config_to_hf(const VitConfig& c, DType dtype) {
  json id2label = json::object(), label2id = json::object();
  for (int64_t k = 0; k < c.num_labels; ++k) {
    id2label[std::to_string(k)] = "LABEL_" + std::to_string(k);
    label2id["LABEL_" + std::to_string(k)] = k;
  }
  json j = {{"architectures", {"ViTForImageClassification"}}, {"model_type", "vit"}, {"hidden_act", "gelu"}};
  write_hf_fields(vit_schema(), c, j);
  j["qkv_bias"] = true;
  j["encoder_stride"] = c.patch_size;
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["torch_dtype"] = io::torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_vit_tensors(const io::HfModelFiles& files, const VitConfig& c) {
  HfWeightRules r;
  r.rename = [](const std::string& name) {  // ViTModel's pooler: not the classifier's input
    return name.starts_with("vit.pooler.") ? std::string() : name;
  };
  r.known = parameter_of(VitModel(c, ModelContext::shape_only()));
  r.model = describe(c);
  return read_hf_weights(files, r);
}

}  // namespace

HfMapping hf() {
  HfMapping m = hf_mapping("vit", "ViTForImageClassification", &vit_config_from_hf, &vit_config_to_hf,
                           &read_hf_vit_tensors, &vit_config, vit_schema());
  m.key_names.emplace_back("model.num_labels", "num_labels");
  return m;
}

}  // namespace mf::models::vit
