#include "meshflow/models/vit/hf.h"

#include <nlohmann/json.hpp>
#include <set>

#include "meshflow/io/safetensors.h"

namespace mf::models {

using json = nlohmann::ordered_json;

VitConfig vit_config_from_hf(const std::string& path) {
  const json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  const std::string type = io::json_get(j, path, "model_type", std::string("vit"));
  MF_CHECK(type == "vit", path, ": model_type '", type, "' is not vit");
  const std::string act = io::json_get(j, path, "hidden_act", std::string("gelu"));
  MF_CHECK(act == "gelu", path, ": hidden_act '", act, "' is not supported (meshflow's ViT uses gelu, the erf form)");
  MF_CHECK(io::json_get(j, path, "qkv_bias", true), path, ": qkv_bias false is not supported");
  VitConfig c;
  c.image_size = io::json_get(j, path, "image_size", 224);
  c.patch_size = io::json_get(j, path, "patch_size", 16);
  c.num_channels = io::json_get(j, path, "num_channels", 3);
  c.hidden_size = io::json_get(j, path, "hidden_size", 768);
  c.num_layers = io::json_get(j, path, "num_hidden_layers", 12);
  c.num_attention_heads = io::json_get(j, path, "num_attention_heads", 12);
  c.ffn_hidden_size = io::json_get(j, path, "intermediate_size", 3072);
  c.num_labels = j.contains("id2label") && j["id2label"].is_object() ? static_cast<int64_t>(j["id2label"].size())
                                                                      : io::json_get(j, path, "num_labels", 2);
  c.layernorm_epsilon = io::json_get(j, path, "layer_norm_eps", 1e-12);
  c.embedding_dropout_prob = c.output_dropout_prob = io::json_get(j, path, "hidden_dropout_prob", 0.0);
  c.attention_dropout_prob = io::json_get(j, path, "attention_probs_dropout_prob", 0.0);
  c.initializer_range = io::json_get(j, path, "initializer_range", 0.02);
  try {
    c.validate();
  } catch (const Error& e) {
    MF_THROW(path, ": ", e.what());
  }
  return c;
}

std::string vit_config_to_hf(const VitConfig& c, DType dtype) {
  json id2label = json::object(), label2id = json::object();
  for (int64_t k = 0; k < c.num_labels; ++k) {
    id2label[std::to_string(k)] = "LABEL_" + std::to_string(k);
    label2id["LABEL_" + std::to_string(k)] = k;
  }
  json j = {{"architectures", {"ViTForImageClassification"}},
            {"model_type", "vit"},
            {"image_size", c.image_size},
            {"patch_size", c.patch_size},
            {"num_channels", c.num_channels},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"intermediate_size", c.ffn_hidden_size},
            {"hidden_act", "gelu"},
            {"hidden_dropout_prob", c.output_dropout_prob},
            {"attention_probs_dropout_prob", c.attention_dropout_prob},
            {"initializer_range", c.initializer_range},
            {"layer_norm_eps", c.layernorm_epsilon},
            {"qkv_bias", true},
            {"encoder_stride", c.patch_size},
            {"id2label", id2label},
            {"label2id", label2id},
            {"torch_dtype", io::torch_dtype_name(dtype)}};
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_vit_tensors(const io::HfModelFiles& files, const VitConfig& c) {
  std::set<std::string> names;
  for (const auto& [name, shape] : vit_parameter_shapes(c)) names.insert(name);
  nn::NamedTensors out;
  for (const std::string& file : files.weights)
    for (auto& [name, t] : io::load_safetensors(file).tensors) {
      if (name.compare(0, 11, "vit.pooler.") == 0) continue;  // ViTModel's pooler: not the classifier's input
      MF_CHECK(names.count(name), file, ": unknown tensor '", name, "' (not a parameter of ", vit_describe(c), ")");
      out.emplace_back(name, t);
    }
  return out;
}

}  // namespace mf::models
