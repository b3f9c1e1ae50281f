// The files of a Hugging Face model on disk, whatever the model: config.json and the safetensors
// weights (one file, or shards listed by model.safetensors.index.json).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshflow/core/dtype.h"

namespace mf::io {

// `path` is a folder holding config.json and model.safetensors (or a sharded
// model.safetensors.index.json), or a .safetensors file with config.json beside it. Throws naming
// what is missing (a pytorch_model.bin is not read).
struct HfModelFiles {
  std::string config;                // config.json
  std::vector<std::string> weights;  // the safetensors file(s)
  std::string source;                // the weights file, or the index of sharded ones (for messages)
};
HfModelFiles find_hf_model_files(const std::string& path);

// A JSON file's object; throws naming the file when it is not valid JSON.
nlohmann::ordered_json read_json_file(const std::string& path);
// config.json's "model_type" ("" when absent).
std::string hf_model_type(const std::string& config_json_path);

// A config.json value: j[key], or `fallback` when absent or null; throws naming the file (`path`)
// and the key when it has another type.
int64_t json_get(const nlohmann::ordered_json& j, const std::string& path, const char* key, int64_t fallback);
inline int64_t json_get(const nlohmann::ordered_json& j, const std::string& path, const char* key, int fallback) {
  return json_get(j, path, key, int64_t{fallback});
}
double json_get(const nlohmann::ordered_json& j, const std::string& path, const char* key, double fallback);
bool json_get(const nlohmann::ordered_json& j, const std::string& path, const char* key, bool fallback);
std::string json_get(const nlohmann::ordered_json& j, const std::string& path, const char* key,
                     const std::string& fallback);
// config.json's "torch_dtype" name of a dtype: "bfloat16", "float16", "float64" or "float32".
const char* torch_dtype_name(DType dtype);

}  // namespace mf::io
