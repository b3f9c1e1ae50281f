// Config: the fully resolved run configuration, a flat map of dotted keys ("train.train_iter")
// over the sections model, train, optim, data and tokenization. The schema is the defaults
// document compiled into the binary (defaults.cpp): every valid key and its default live there,
// and a key's type is the type of its default. Files may name a `_base_:` to inherit from;
// `key=value` overrides apply last. Unknown keys and mistyped values throw mf::Error naming the
// key, where it came from, and the closest valid key.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace mf {

enum class ConfigType { kInt, kFloat, kBool, kString, kFloatList };

// "an integer", "a float", "a bool", "a string", "a list of numbers"
const char* config_type_name(ConfigType t);

using ConfigValue = std::variant<int64_t, double, bool, std::string, std::vector<double>>;

class Config {
 public:
  // The defaults document alone (same as defaults()).
  Config();
  static Config defaults();
  // Defaults, then the file chain (`_base_` first, recursively, relative to each file's own
  // directory; cycles are an error), then each "key=value" of `overrides` in order.
  static Config load(const std::string& path, const std::vector<std::string>& overrides = {});
  // Parses YAML text as if it were a file named `source` whose `_base_` paths resolve against
  // `base_dir`. Used by load(); handy for tests and embedded configs.
  static Config from_yaml(const std::string& text, const std::string& source = "<string>",
                          const std::string& base_dir = ".");

  // Typed getters; a missing key throws with a suggestion, a getter of the wrong type throws
  // naming the key's type. get_float also reads int keys.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<double> get_float_list(const std::string& key) const;

  // Sets `key` from its text form with the same validation as a file or an override
  // ("6e-4", "true", "[0.9, 0.95]"). `source` names the origin in error messages.
  // `source` names where the value came from in error messages ("command line", a file); empty:
  // the program's own (a model's sizes written back as keys), named by the caller.
  void set(const std::string& key, const std::string& value, const std::string& source = "");
  // Applies one "key=value" override; text without '=' is an error.
  void apply_override(const std::string& key_equals_value);

  bool has(const std::string& key) const;
  // Whether `key` was given (by a file, an override or set()) rather than left at its default,
  // and by what: the file, "command line", or set()'s source ("" for the program's own).
  bool is_given(const std::string& key) const { return given_.count(key) != 0; }
  std::string given_by(const std::string& key) const;
  ConfigType type_of(const std::string& key) const;
  const ConfigValue& value(const std::string& key) const;
  // The value as text in the form dump() writes ("0.0003", "true", "[0.9, 0.95]", "gpt2").
  std::string get_text(const std::string& key) const;
  // Every valid key, in the order of the defaults document.
  static const std::vector<std::string>& keys();

  // YAML of the resolved config: nested sections, defaults-document key order, floats in the
  // shortest text that parses back to the same double. from_yaml(dump()) == *this.
  std::string dump() const;
  // Writes dump() to `path` atomically.
  void save(const std::string& path) const;

  bool operator==(const Config& other) const { return values_ == other.values_; }
  bool operator!=(const Config& other) const { return !(*this == other); }

 private:
  void load_file(const std::string& path, std::vector<std::string>& chain);
  void apply_yaml(const std::string& text, const std::string& source, const std::string& base_dir,
                  std::vector<std::string>& chain);

  std::map<std::string, ConfigValue> values_;
  std::map<std::string, std::string> given_;  // key -> where its value came from (is_given)
};

namespace config_detail {
// " (from SOURCE)" for error messages, "" when the source is the program's own.
inline std::string from_text(const std::string& source) { return source.empty() ? "" : " (from " + source + ")"; }
// One schema entry: key, type and default, in document order.
struct SchemaEntry {
  std::string key;
  ConfigType type;
  ConfigValue default_value;
};
// The compiled-in defaults document (defaults.cpp).
const char* defaults_yaml();
// The parsed schema (built once from defaults_yaml()).
const std::vector<SchemaEntry>& schema();
const SchemaEntry* find_entry(const std::string& key);
// Closest valid key to `key` (edit distance on the dotted key and on its last segment), or ""
// when nothing is close.
std::string suggest_key(const std::string& key);
// "; did you mean `x`?" or "" — appended to unknown-key messages.
std::string did_you_mean(const std::string& key);
// `s` without its leading and trailing blanks (spaces, tabs, CR, LF).
std::string trim(const std::string& s);
// Text → value of type `t`; throws "<key> expects <type>, got "<text>" (<source>)".
ConfigValue parse_value(const std::string& key, ConfigType t, const std::string& text, const std::string& source);
// A numeric key's valid range (ranges.cpp; a list's holds for each element), "[0, inf)" as text,
// and the check parse_value() makes: throws "<key>=<text> is outside its range [lo, hi] (from
// <source>)". Keys without a range (strings, bools) pass.
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  bool integer = false;  // a list of whole numbers (iterations, stage ids), each below 2^63
  bool holds(double x) const;  // inside the bounds (NaN never is)
};
const Range* range_of(const std::string& key);
std::string range_text(const Range& r);
void check_range(const std::string& key, const ConfigValue& v, const std::string& text, const std::string& source);
// Value → the text dump() writes.
std::string format_value(const ConfigValue& v);
// Shortest decimal text that parses back to exactly `x` (".inf", "-.inf", ".nan" for those).
std::string format_double(double x);
}  // namespace config_detail

}  // namespace mf
