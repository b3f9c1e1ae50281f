// jsonl input (preprocess documents, classification examples): one JSON object per line, blank
// lines skipped. Errors are "<where>:<line>: ..." (`where`: the caller's prefix and the file).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace mf {

bool is_blank(std::string_view line);  // only white space
// Calls fn(line number, object) for every non-blank line of `path`; throws for a file it cannot
// open or read, a line that is not valid JSON or not an object.
void for_each_jsonl_object(const std::string& path, const std::string& where,
                           const std::function<void(int64_t, const nlohmann::json&)>& fn);
// The same over a stream (`where` names it in errors); also what the fuzz target reads (fuzz/).
void for_each_jsonl_object(std::istream& in, const std::string& where,
                           const std::function<void(int64_t, const nlohmann::json&)>& fn);
// The string under `key` of line `line`'s object; throws when absent or not a string.
const std::string& jsonl_string(const nlohmann::json& j, const std::string& key, const std::string& where, int64_t line);

}  // namespace mf
