#include "meshflow/io/hf_files.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf::io {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

json read_json_file(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    MF_THROW(path, ": not valid JSON: ", e.what());
  }
}

std::string hf_model_type(const std::string& config_json_path) {
  const json j = read_json_file(config_json_path);
  MF_CHECK(j.is_object(), config_json_path, ": not a JSON object");
  if (!j.contains("model_type") || !j["model_type"].is_string()) return "";
  return j["model_type"].get<std::string>();
}

HfModelFiles find_hf_model_files(const std::string& path) {
  const fs::path p(path);
  MF_CHECK(fs::exists(p), path, ": no such file or directory");
  HfModelFiles f;
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path().empty() ? fs::path(".") : p.parent_path();
  f.config = (dir / "config.json").string();
  MF_CHECK(fs::is_regular_file(f.config), f.config,
           ": not found (a Hugging Face model needs its config.json beside the weights)");
  if (!fs::is_directory(p)) {
    f.weights.push_back(p.string());
    f.source = p.string();
    return f;
  }
  if (fs::is_regular_file(p / "model.safetensors")) {
    f.weights.push_back((p / "model.safetensors").string());
    f.source = f.weights[0];
    return f;
  }
  const fs::path index = p / "model.safetensors.index.json";
  if (fs::is_regular_file(index)) {  // sharded: {"weight_map": {tensor: file}}
    json j = read_json_file(index.string());
    MF_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), index.string(), ": no \"weight_map\" object");
    std::set<std::string> seen;
    for (auto& [tensor, file] : j["weight_map"].items()) {
      MF_CHECK(file.is_string(), index.string(), ": weight_map entry '", tensor, "' is not a file name");
      const std::string shard = (p / file.get<std::string>()).string();
      if (seen.insert(shard).second) f.weights.push_back(shard);
    }
    MF_CHECK(!f.weights.empty(), index.string(), ": empty weight_map");
    f.source = index.string();
    return f;
  }
  MF_THROW(path, ": no model.safetensors (or model.safetensors.index.json)",
           fs::exists(p / "pytorch_model.bin") ? "; pytorch_model.bin is not read: save the model with "
                                                 "save_pretrained(..., safe_serialization=True)"
                                               : "");
}

namespace {
template <class T>
T typed(const json& j, const std::string& path, const char* key, T fallback, const char* want) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    MF_THROW(path, ": \"", key, "\" is ", j[key].dump(), ", expected ", want);
  }
}
}  // namespace

int64_t json_get(const json& j, const std::string& path, const char* key, int64_t fallback) {
  if (j.contains(key) && j[key].is_number_float()) MF_THROW(path, ": \"", key, "\" is ", j[key].dump(), ", expected an integer");
  return typed<int64_t>(j, path, key, fallback, "an integer");
}
double json_get(const json& j, const std::string& path, const char* key, double fallback) {
  return typed<double>(j, path, key, fallback, "a number");
}
bool json_get(const json& j, const std::string& path, const char* key, bool fallback) {
  if (j.contains(key) && !j[key].is_null() && !j[key].is_boolean())
    MF_THROW(path, ": \"", key, "\" is ", j[key].dump(), ", expected a bool");
  return typed<bool>(j, path, key, fallback, "a bool");
}
std::string json_get(const json& j, const std::string& path, const char* key, const std::string& fallback) {
  if (j.contains(key) && !j[key].is_null() && !j[key].is_string())
    MF_THROW(path, ": \"", key, "\" is ", j[key].dump(), ", expected a string");
  return typed<std::string>(j, path, key, fallback, "a string");
}

const char* torch_dtype_name(DType dtype) {
  return dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : dtype == DType::kF64 ? "float64" : "float32";
}

}  // namespace mf::io
