// Config: loading (file chains with `_base_`, overrides), validation against the defaults
// schema, typed access, and the YAML dump that loads back to an identical Config.
#include "meshflow/config/config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf {

using config_detail::did_you_mean;
using config_detail::find_entry;
using config_detail::format_value;
using config_detail::from_text;
using config_detail::parse_value;
using config_detail::schema;
using config_detail::SchemaEntry;

namespace {

namespace fs = std::filesystem;

bool is_section(const std::string& prefix) {
  for (const SchemaEntry& e : schema())
    if (e.key.size() > prefix.size() && e.key.compare(0, prefix.size(), prefix) == 0 && e.key[prefix.size()] == '.')
      return true;
  return false;
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& source) {
  if (is_section(key)) MF_THROW("config key `", key, "` is a section, not a value", from_text(source));
  MF_THROW("unknown config key `", key, "`", from_text(source), did_you_mean(key));
}

const SchemaEntry& entry_for(const std::string& key, const std::string& source) {
  const SchemaEntry* e = find_entry(key);
  if (!e) unknown_key(key, source);
  return *e;
}

std::string flow_text(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// One YAML node at `key` → the key's value.
ConfigValue node_value(const SchemaEntry& e, const YAML::Node& node, const std::string& source) {
  if (node.IsNull()) {
    if (e.type == ConfigType::kString) return std::string();
    MF_THROW(e.key, " expects ", config_type_name(e.type), ", got null", from_text(source));
  }
  if (node.IsScalar()) return parse_value(e.key, e.type, node.Scalar(), source);
  if (e.type == ConfigType::kFloatList && node.IsSequence()) return parse_value(e.key, e.type, flow_text(node), source);
  MF_THROW(e.key, " expects ", config_type_name(e.type), ", got \"", flow_text(node), "\"", from_text(source));
}

// Strings that a YAML reader would take for something else are written quoted.
bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* special[] = {"null", "Null", "NULL", "~", "true", "True", "TRUE", "false", "False", "FALSE",
                                  "yes", "Yes", "no", "No", "on", "On", "off", "Off"};
  for (const char* w : special)
    if (s == w) return true;
  char c = s[0];
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || s.front() == ' ' || s.back() == ' ';
}

}  // namespace

Config::Config() {
  for (const SchemaEntry& e : schema()) values_.emplace(e.key, e.default_value);
}

Config Config::defaults() { return Config(); }

Config Config::load(const std::string& path, const std::vector<std::string>& overrides) {
  Config c = defaults();
  std::vector<std::string> chain;
  c.load_file(path, chain);
  for (const std::string& o : overrides) c.apply_override(o);
  return c;
}

Config Config::from_yaml(const std::string& text, const std::string& source, const std::string& base_dir) {
  Config c = defaults();
  std::vector<std::string> chain;
  c.apply_yaml(text, source, base_dir, chain);
  return c;
}

void Config::load_file(const std::string& path, std::vector<std::string>& chain) {
  std::error_code ec;
  std::string canon = fs::weakly_canonical(fs::absolute(path), ec).string();
  if (ec) canon = path;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain[i] != canon) continue;
    std::string cycle;
    for (size_t j = i; j < chain.size(); ++j) cycle += chain[j] + " -> ";
    MF_THROW("config `_base_` cycle: ", cycle, canon);
  }
  MF_CHECK(!fs::is_directory(path) || !fs::is_regular_file(fs::path(path) / "config.yaml"), "config ", path,
           " is a folder; a run's config is ", (fs::path(path) / "config.yaml").string());
  MF_CHECK(!fs::is_directory(path), "config ", path, " is a folder; give a YAML file");
  MF_CHECK(fs::exists(path), "config file not found: ", path);
  MF_CHECK(fs::is_regular_file(path), "config ", path, " is not a regular file; give a YAML file");
  std::string text = read_file(path);
  chain.push_back(canon);
  apply_yaml(text, path, fs::path(path).parent_path().string(), chain);
  chain.pop_back();
}

void Config::apply_yaml(const std::string& text, const std::string& source, const std::string& base_dir,
                        std::vector<std::string>& chain) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    MF_THROW("cannot parse config ", source, ": ", e.what());
  }
  // A file with nothing in it (or only comments) is a mistake, not the defaults: say so rather
  // than fail later on a key it was meant to set.
  MF_CHECK(!root.IsNull() || chain.size() != 1, "config ", source,
           " is empty: a config sets keys (model.*, train.*, data.*, ...) or names a `_base_`, e.g. configs/gpt2/tiny.yaml");
  if (root.IsNull()) return;
  MF_CHECK(root.IsMap(), "config ", source, " must be a mapping of sections, got \"", flow_text(root), "\"");

  // Bases first, in the order listed; this file's keys override them.
  if (YAML::Node base = root["_base_"]) {
    std::vector<std::string> bases;
    if (base.IsScalar()) bases.push_back(base.Scalar());
    else if (base.IsSequence())
      for (const auto& b : base) bases.push_back(b.IsScalar() ? b.Scalar() : std::string());
    for (const std::string& b : bases) {
      MF_CHECK(!b.empty(), "config ", source, ": `_base_` must be a file path or a list of them");
      fs::path p(b);
      if (p.is_relative()) p = fs::path(base_dir.empty() ? "." : base_dir) / p;
      load_file(p.string(), chain);
    }
  }

  // Depth-first over the mapping; dotted keys inside the file are allowed too.
  // A key twice in one mapping is an error in YAML; the parser keeps both, so it is caught here
  // (otherwise the second would win without a word).
  auto walk = [&](auto&& self, const YAML::Node& map, const std::string& prefix) -> void {
    std::set<std::string> names;
    for (const auto& item : map) {
      MF_CHECK(item.first.IsScalar(), "config ", source, ": a key under `", prefix, "` is not a name");
      std::string name = item.first.Scalar();
      MF_CHECK(names.insert(name).second, "config ", source, ": `", prefix.empty() ? name : prefix + "." + name,
               "` is set twice", item.first.Mark().line >= 0 ? detail::cat(" (again on line ", item.first.Mark().line + 1, ")") : "");
      if (prefix.empty() && name == "_base_") continue;
      std::string key = prefix.empty() ? name : prefix + "." + name;
      const YAML::Node& v = item.second;
      if (v.IsMap() && !find_entry(key)) {
        if (!is_section(key)) unknown_key(key, source);
        self(self, v, key);
        continue;
      }
      const SchemaEntry& e = entry_for(key, source);
      values_[key] = node_value(e, v, source);
      given_[key] = source;
    }
  };
  walk(walk, root, "");
}

namespace {
template <class T>
const T& typed(const Config& c, const std::string& key, ConfigType want) {
  const ConfigValue& v = c.value(key);
  const T* p = std::get_if<T>(&v);
  MF_CHECK(p, "config key `", key, "` holds ", config_type_name(c.type_of(key)), ", not ", config_type_name(want));
  return *p;
}
}  // namespace

const ConfigValue& Config::value(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) unknown_key(key, "lookup");
  return it->second;
}

ConfigType Config::type_of(const std::string& key) const { return entry_for(key, "lookup").type; }
bool Config::has(const std::string& key) const { return find_entry(key) != nullptr; }

int64_t Config::get_int(const std::string& key) const { return typed<int64_t>(*this, key, ConfigType::kInt); }
double Config::get_float(const std::string& key) const {
  if (auto* i = std::get_if<int64_t>(&value(key))) return static_cast<double>(*i);
  return typed<double>(*this, key, ConfigType::kFloat);
}
bool Config::get_bool(const std::string& key) const { return typed<bool>(*this, key, ConfigType::kBool); }
std::string Config::get_string(const std::string& key) const {
  return typed<std::string>(*this, key, ConfigType::kString);
}
std::vector<double> Config::get_float_list(const std::string& key) const {
  return typed<std::vector<double>>(*this, key, ConfigType::kFloatList);
}
std::string Config::get_text(const std::string& key) const { return format_value(value(key)); }

void Config::set(const std::string& key, const std::string& value, const std::string& source) {
  const SchemaEntry& e = entry_for(key, source);
  values_[key] = parse_value(key, e.type, value, source);
  given_[key] = source;
}

std::string Config::given_by(const std::string& key) const {
  auto it = given_.find(key);
  return it == given_.end() ? std::string() : it->second;
}

void Config::apply_override(const std::string& kv) {
  size_t eq = kv.find('=');
  MF_CHECK(eq != std::string::npos, "config override `", kv, "` is not key=value");
  std::string key = kv.substr(0, eq);
  while (!key.empty() && key.back() == ' ') key.pop_back();
  while (!key.empty() && key.front() == ' ') key.erase(0, 1);
  MF_CHECK(!key.empty(), "config override `", kv, "` has no key");
  set(key, kv.substr(eq + 1), "command line");
}

const std::vector<std::string>& Config::keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> out;
    for (const SchemaEntry& e : schema()) out.push_back(e.key);
    return out;
  }();
  return k;
}

std::string Config::dump() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // sections currently open, outermost first
  for (const SchemaEntry& e : schema()) {
    std::vector<std::string> parts;
    for (size_t b = 0, d; b <= e.key.size(); b = d + 1) {
      d = e.key.find('.', b);
      if (d == std::string::npos) d = e.key.size();
      parts.push_back(e.key.substr(b, d - b));
    }
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    const ConfigValue& v = values_.at(e.key);
    if (auto* b = std::get_if<bool>(&v)) {
      out << *b;
    } else if (auto* s = std::get_if<std::string>(&v)) {
      if (needs_quotes(*s)) out << YAML::DoubleQuoted;
      out << *s;
    } else if (auto* list = std::get_if<std::vector<double>>(&v)) {
      out << YAML::Flow << YAML::BeginSeq;
      for (double x : *list) out << config_detail::format_double(x);
      out << YAML::EndSeq;
    } else {
      out << format_value(v);
    }
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  MF_CHECK(out.good(), "config dump failed: ", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

void Config::save(const std::string& path) const { write_file_atomic(path, dump()); }

}  // namespace mf
