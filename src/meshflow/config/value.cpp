// Config values as text: strict parsing of a key's text form into its schema type (the one
// path files, overrides and set() share) and the exact text form dump() writes back.
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf {

const char* config_type_name(ConfigType t) {
  switch (t) {
    case ConfigType::kInt: return "an integer";
    case ConfigType::kFloat: return "a float";
    case ConfigType::kBool: return "a bool (true/false)";
    case ConfigType::kString: return "a string";
    case ConfigType::kFloatList: return "a list of numbers";
  }
  return "?";
}

namespace config_detail {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

namespace {

[[noreturn]] void bad_value(const std::string& key, ConfigType t, const std::string& text, const std::string& source) {
  MF_THROW(key, " expects ", config_type_name(t), ", got \"", text, "\"", from_text(source));
}

bool parse_int(std::string s, int64_t& out) {
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_double(std::string s, double& out) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, std::chars_format::general);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

}  // namespace

namespace {
ConfigValue parse_typed(const std::string& key, ConfigType t, const std::string& raw, const std::string& source) {
  std::string text = t == ConfigType::kString ? raw : trim(raw);
  switch (t) {
    case ConfigType::kInt: {
      int64_t v;
      if (!parse_int(text, v)) bad_value(key, t, raw, source);
      return v;
    }
    case ConfigType::kFloat: {
      double v;
      if (!parse_double(text, v)) bad_value(key, t, raw, source);
      return v;
    }
    case ConfigType::kBool: {
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
      bad_value(key, t, raw, source);
    }
    case ConfigType::kString: return text;
    case ConfigType::kFloatList: {
      YAML::Node node;
      try {
        node = YAML::Load(text);
      } catch (const YAML::Exception&) {
        bad_value(key, t, raw, source);
      }
      if (!node.IsSequence()) bad_value(key, t, raw, source);
      std::vector<double> out;
      for (const auto& item : node) {
        double v;
        if (!item.IsScalar() || !parse_double(item.Scalar(), v)) bad_value(key, t, raw, source);
        out.push_back(v);
      }
      return out;
    }
  }
  bad_value(key, t, raw, source);
}
}  // namespace

ConfigValue parse_value(const std::string& key, ConfigType t, const std::string& raw, const std::string& source) {
  ConfigValue v = parse_typed(key, t, raw, source);
  check_range(key, v, t == ConfigType::kString ? raw : trim(raw), source);
  return v;
}

std::string format_double(double x) {
  if (std::isnan(x)) return ".nan";
  if (std::isinf(x)) return x > 0 ? ".inf" : "-.inf";
  // Shortest digits that round-trip; fixed notation for exponents in [-4, 16) like %g, else
  // "d.ddde-N". Either way a '.' and a signed exponent, so YAML 1.1 readers see a float too.
  char buf[400];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  MF_CHECK(ec == std::errc(), "format_double failed");
  std::string sci(buf, p);
  size_t e = sci.find('e');
  int exp10 = std::stoi(sci.substr(e + 1));
  if (exp10 >= -4 && exp10 < 16) {
    auto [q, ec2] = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed);
    MF_CHECK(ec2 == std::errc(), "format_double failed");
    std::string s(buf, q);
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  std::string mant = sci.substr(0, e);
  if (mant.find('.') == std::string::npos) mant += ".0";
  return mant + (exp10 < 0 ? "e-" : "e+") + std::to_string(std::abs(exp10));
}

std::string format_value(const ConfigValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) return format_double(*d);
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  const auto& list = std::get<std::vector<double>>(v);
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + format_double(list[i]);
  return out + "]";
}

}  // namespace config_detail
}  // namespace mf
