#include "meshflow/data/jsonl.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"

namespace mf {

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos; }

void for_each_jsonl_object(const std::string& path, const std::string& where,
                           const std::function<void(int64_t, const nlohmann::json&)>& fn) {
  std::ifstream in(path, std::ios::binary);
  MF_CHECK(in.is_open(), where, ": cannot open the file");
  for_each_jsonl_object(in, where, fn);
}

void for_each_jsonl_object(std::istream& in, const std::string& where,
                           const std::function<void(int64_t, const nlohmann::json&)>& fn) {
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (is_blank(line)) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      MF_THROW(where, ":", lineno, ": invalid JSON (", e.what(), ")");
    }
    MF_CHECK(j.is_object(), where, ":", lineno, ": expected a JSON object, got ", j.type_name());
    fn(lineno, j);
  }
  MF_CHECK(!in.bad(), where, ": error reading the file");
}

const std::string& jsonl_string(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t line) {
  auto it = j.find(key);
  MF_CHECK(it != j.end(), where, ":", line, ": no key '", key, "'");
  MF_CHECK(it->is_string(), where, ":", line, ": '", key, "' is a ", it->type_name(), ", not a string");
  return it->get_ref<const std::string&>();
}

}  // namespace mf
