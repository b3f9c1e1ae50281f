#include "meshflow/models/schema_hf.h"

#include <algorithm>

namespace mf::models {

namespace {
std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}
}  // namespace

nlohmann::ordered_json read_hf_config(const std::string& path, const std::vector<std::string>& types, std::string* type) {
  nlohmann::ordered_json j = io::read_json_file(path);
  MF_CHECK(j.is_object(), path, ": not a JSON object");
  const std::string t = io::json_get(j, path, "model_type", types.at(0));
  MF_CHECK(std::find(types.begin(), types.end(), t) != types.end(), path, ": model_type '", t, "' is not ",
           types.size() == 1 ? "" : "one of ", joined(types));
  if (type) *type = t;
  return j;
}

std::string require_hf_string(const nlohmann::ordered_json& j, const std::string& path, const char* key,
                              const std::vector<std::string>& allowed, const std::string& why) {
  const std::string v = io::json_get(j, path, key, allowed.at(0));
  MF_CHECK(std::find(allowed.begin(), allowed.end(), v) != allowed.end(), path, ": ", key, " '", v, "' is not supported (",
           why, ")");
  return v;
}

}  // namespace mf::models
