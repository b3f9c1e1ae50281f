// config.json from and to a model's schema (models/schema.h): each field with a Hugging Face key
// is read (absent or null: the member keeps its value, the class's default) and written under
// that key; a dotted key is a member of a nested object ("rope_scaling.factor").
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/schema.h"

namespace mf::models {

// config.json at `path`: a JSON object whose model_type (absent: the first of `types`) is one of
// `types`, which *type receives. Throws naming the file.
nlohmann::ordered_json read_hf_config(const std::string& path, const std::vector<std::string>& types,
                                      std::string* type = nullptr);

// j[key] (absent: allowed[0]), a string, one of `allowed`; else throws "<path>: <key> '<value>' is
// not supported (<why>)".
std::string require_hf_string(const nlohmann::ordered_json& j, const std::string& path, const char* key,
                              const std::vector<std::string>& allowed, const std::string& why);

// c after c.validate(), whose message names the config.json it was read from.
template <class C>
C validated(C c, const std::string& path) {
  try {
    c.validate();
  } catch (const Error& e) {
    MF_THROW(path, ": ", e.what());
  }
  return c;
}

template <class C>
void read_hf_fields(const Schema<C>& s, const nlohmann::ordered_json& j, const std::string& path, C& out) {
  for (const auto& f : s.fields()) {
    if (f.hf_key.empty()) continue;
    const nlohmann::ordered_json* obj = &j;
    std::string key = f.hf_key;
    if (const size_t dot = key.find('.'); dot != std::string::npos) {
      const std::string parent = key.substr(0, dot);
      if (!j.contains(parent) || !j[parent].is_object()) continue;
      obj = &j[parent];
      key = key.substr(dot + 1);
    }
    std::visit([&](auto m) { out.*m = io::json_get(*obj, path, key.c_str(), out.*m); }, f.member);
  }
}

template <class C>
void write_hf_fields(const Schema<C>& s, const C& in, nlohmann::ordered_json& j) {
  for (const auto& f : s.fields()) {
    if (f.hf_key.empty()) continue;
    const size_t dot = f.hf_key.find('.');
    std::visit(
        [&](auto m) {
          if (dot == std::string::npos) j[f.hf_key] = in.*m;
          else j[f.hf_key.substr(0, dot)][f.hf_key.substr(dot + 1)] = in.*m;
        },
        f.member);
  }
}

}  // namespace mf::models
