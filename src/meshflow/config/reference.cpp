#include "meshflow/config/reference.h"

#include <cctype>
#include <cstddef>
#include <map>
#include <sstream>
#include <utility>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf {

namespace {

using config_detail::trim;

// Where the comment of `value_part` (the text after a key's ':') begins: the first '#' at its
// start or after a blank, past a quoted scalar; npos when it has none.
size_t comment_start(const std::string& value_part) {
  size_t i = value_part.find_first_not_of(" \t");
  if (i == std::string::npos) return std::string::npos;
  if (value_part[i] == '"' || value_part[i] == '\'') {
    const char quote = value_part[i];
    for (++i; i < value_part.size() && value_part[i] != quote; ++i)
      if (quote == '"' && value_part[i] == '\\') ++i;  // an escaped character, \" included
    ++i;
  }
  for (; i < value_part.size(); ++i)
    if (value_part[i] == '#' && (i == 0 || value_part[i - 1] == ' ' || value_part[i - 1] == '\t')) return i;
  return std::string::npos;
}

// A table cell: '|' escaped (also inside code spans, as tables need), and a '<' that could open an
// HTML tag (`<prefix>`, `</s>`) outside code spans, so that it reads as text.
std::string cell(const std::string& text) {
  std::string out;
  bool code = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '`') code = !code;
    const bool tag = c == '<' && !code &&
                     (std::isalpha(static_cast<unsigned char>(next)) || next == '/' || next == '!' || next == '?');
    if (c == '|' || tag) out += '\\';
    out += c;
  }
  return out;
}

// The default as the dump of a config writes it, as code; the empty string as "".
std::string default_cell(const config_detail::SchemaEntry& e) {
  const std::string text = config_detail::format_value(e.default_value);
  return cell(text.empty() && e.type == ConfigType::kString ? "`\"\"`" : "`" + text + "`");
}

std::string range_cell(const config_detail::SchemaEntry& e) {
  const config_detail::Range* r = config_detail::range_of(e.key);
  if (r == nullptr) return "";
  const std::string text = config_detail::range_text(*r);
  return cell(e.type == ConfigType::kFloatList ? text + " (each element)" : text);
}

}  // namespace

std::vector<ConfigKeyDoc> parse_config_key_docs(const std::string& text) {
  std::vector<ConfigKeyDoc> docs;
  std::vector<std::pair<size_t, std::string>> open;  // the sections around the line: indent, name
  // Whether a comment-only line continues the comment of the last entry (no blank line between).
  bool continues = false;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || trim(line).empty()) {
      continues = false;
      continue;
    }
    if (line[indent] == '#') {
      const std::string more = trim(line.substr(indent + 1));
      if (continues && !more.empty()) {
        std::string& meaning = docs.back().meaning;
        meaning += meaning.empty() ? more : " " + more;
      }
      continue;
    }
    const size_t colon = line.find(':', indent);
    const std::string name = colon == std::string::npos ? "" : line.substr(indent, colon - indent);
    MF_CHECK(!name.empty() && name.find_first_of(" \t#\"'-[{") == std::string::npos, "defaults document line ", number,
             ": cannot read `", trim(line), "` (the key reference reads `key: value  # meaning` lines)");
    const std::string rest = line.substr(colon + 1);
    const size_t hash = comment_start(rest);
    const std::string value = trim(rest.substr(0, hash));
    while (!open.empty() && open.back().first >= indent) open.pop_back();
    std::string key;
    for (const auto& section : open) key += section.second + ".";
    ConfigKeyDoc doc;
    doc.key = key + name;
    doc.section = value.empty();
    if (hash != std::string::npos) doc.meaning = trim(rest.substr(hash + 1));
    if (doc.section) open.emplace_back(indent, name);
    docs.push_back(std::move(doc));
    continues = true;
  }
  return docs;
}

const std::vector<ConfigKeyDoc>& config_key_docs() {
  static const std::vector<ConfigKeyDoc> docs = parse_config_key_docs(config_detail::defaults_yaml());
  return docs;
}

std::string config_reference_markdown() {
  const std::vector<ConfigKeyDoc>& docs = config_key_docs();
  const std::vector<config_detail::SchemaEntry>& schema = config_detail::schema();
  // The comments' keys and the schema's must be the same, in the same order.
  size_t keys = 0, sections = 0;
  for (const ConfigKeyDoc& d : docs) {
    if (d.section) {
      sections += d.key.find('.') == std::string::npos;
      continue;
    }
    MF_CHECK(keys < schema.size() && schema[keys].key == d.key, "defaults document: the key reference read `", d.key,
             "` where the schema has `", keys < schema.size() ? schema[keys].key : "no more keys", "`");
    MF_CHECK(d.key.find('.') != std::string::npos, "defaults document: `", d.key, "` is outside every section");
    ++keys;
  }
  MF_CHECK(keys == schema.size(), "defaults document: the key reference read ", keys, " keys, the schema has ",
           schema.size());

  std::ostringstream md;
  md << "# Configuration keys\n\n"
     << "Generated by `" << kConfigReferenceCommand
     << "` from src/meshflow/config/defaults.cpp (the keys, their defaults and meanings) and "
        "src/meshflow/config/ranges.cpp (the ranges); do not edit by hand.\n\n"
     << "A config file sets these keys as nested YAML, may name a `_base_:` file whose keys it overrides, and "
        "`key=value` arguments on the command line override both (`train.dist.tensor_parallel_size=2`). A key not "
        "listed here is an error, as is a value of another type or outside its range (a list's range holds for each "
        "element); `\"\"` is the empty string. `meshflow config show CONFIG [key=value ...]` prints every key as a "
        "run resolves it.\n\n"
     << schema.size() << " keys in " << sections << " sections.\n";
  size_t i = 0;
  for (const ConfigKeyDoc& d : docs) {
    if (d.section && d.key.find('.') == std::string::npos) {
      md << "\n## " << d.key << "\n\n";
      if (!d.meaning.empty()) md << d.meaning << "\n\n";
      md << "| key | type | default | range | meaning |\n|---|---|---|---|---|\n";
    } else if (d.section) {
      if (!d.meaning.empty()) md << "| `" << d.key << ".*` | | | | " << cell(d.meaning) << " |\n";
    } else {
      const config_detail::SchemaEntry& e = schema[i++];
      md << "| `" << e.key << "` | " << config_type_name(e.type) << " | " << default_cell(e) << " | " << range_cell(e)
         << " | " << cell(d.meaning) << " |\n";
    }
  }
  return md.str();
}

}  // namespace mf
