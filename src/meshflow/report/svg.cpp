#include "meshflow/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mf::report {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at s[i], or 0 (RFC 3629: no overlongs, no surrogates).
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(k) < 0x80 || b(k) > 0xBF) return 0;
  return n;
}

std::string printf_string(const char* fmt, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

// "2.50e-04" -> "2.5e-4".
std::string tidy_scientific(std::string s) {
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  if (mant.find('.') != std::string::npos) {
    while (mant.back() == '0') mant.pop_back();
    if (mant.back() == '.') mant.pop_back();
  }
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.erase(0, 1);
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return mant + "e" + (neg ? "-" : "") + exp;
}

int decimals_for(double step) { return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9))); }

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += kReplacement;
          else out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t n = utf8_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

double nice_step(double lo, double hi, int max_ticks) {
  max_ticks = std::max(1, max_ticks);
  double span = hi - lo;
  if (!(span > 0)) span = std::abs(lo) > 0 ? std::abs(lo) : 1.0;
  double mag = std::pow(10.0, std::floor(std::log10(span / max_ticks)));
  for (;; mag *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * mag;
      const double intervals = std::ceil(hi / step - 1e-9) - std::floor(lo / step + 1e-9);
      if (intervals <= max_ticks) return step;
    }
  }
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!(hi > lo)) {  // one value: an interval around it
    const double pad = std::abs(lo) > 0 ? std::abs(lo) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
  }
  const double step = nice_step(lo, hi, max_ticks);
  const auto first = static_cast<long long>(std::floor(lo / step + 1e-9));
  const auto last = static_cast<long long>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (long long k = first; k <= last; ++k) {
    const double v = static_cast<double>(k) * step;
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0)) lo = hi > 0 ? hi / 10 : 1.0;
  if (!(hi > lo)) hi = lo * 10;
  int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (d1 <= d0) d1 = d0 + 1;
  std::vector<double> all;
  const bool fine = d1 - d0 < 3;
  for (int d = d0; d <= d1; ++d) {
    const double p = std::pow(10.0, d);
    all.push_back(p);
    if (fine && d < d1) {
      all.push_back(2 * p);
      all.push_back(5 * p);
    }
  }
  // Trim to the last tick at or below lo and the first at or above hi.
  size_t a = 0, b = all.size() - 1;
  while (a + 1 < all.size() && all[a + 1] <= lo * (1 + 1e-12)) ++a;
  while (b > a + 1 && all[b - 1] >= hi * (1 - 1e-12)) --b;
  return {all.begin() + static_cast<std::ptrdiff_t>(a), all.begin() + static_cast<std::ptrdiff_t>(b) + 1};
}

std::string format_tick(double value, double step) {
  if (value == 0) return "0";
  step = std::abs(step) > 0 ? std::abs(step) : std::abs(value);
  // The step decides the form, so that every label of an axis has the same one.
  if (step >= 1e3) {
    const double unit = step >= 1e9 ? 1e9 : step >= 1e6 ? 1e6 : 1e3;
    const char* suffix = unit == 1e9 ? "G" : unit == 1e6 ? "M" : "k";
    return printf_string("%.*f", decimals_for(step / unit), value / unit) + suffix;
  }
  if (step < 1e-3) {
    const int digits = std::max(0, static_cast<int>(std::floor(std::log10(std::abs(value)) + 1e-9)) -
                                       static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    return tidy_scientific(printf_string("%.*e", digits, value));
  }
  return printf_string("%.*f", decimals_for(step), value);
}

std::string format_value(double value) {
  if (std::isnan(value)) return "n/a";
  const double a = std::abs(value);
  if (a != 0 && (a < 1e-3 || a >= 1e6)) return tidy_scientific(printf_string("%.*e", 3, value));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

double Scale::operator()(double v) const {
  double a = lo, b = hi;
  if (log) {
    a = std::log10(a);
    b = std::log10(b);
    v = std::log10(v);
  }
  if (!(b != a)) return (px_lo + px_hi) / 2;
  return px_lo + (v - a) / (b - a) * (px_hi - px_lo);
}

const char* palette(size_t i) {
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  return kColors[i % 10];
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

Svg::Svg(double width_px, double height_px, std::string_view css_class)
    : width_(width_px), height_(height_px), class_(css_class) {}

namespace {
// Append ` name="value"` to `out` (the value escaped; nothing for an empty one).
void put(std::string& out, std::string_view name, std::string_view value) {
  if (value.empty()) return;
  out += ' ';
  out += name;
  out += "=\"";
  out += xml_escape(value);
  out += '"';
}

using Attributes = std::initializer_list<std::pair<std::string_view, std::string>>;

// An empty element `<tag a="v" .../>`, or with a tooltip `<tag ...><title>...</title></tag>`.
void element(std::string& out, std::string_view tag, Attributes attributes, std::string_view title = {}) {
  out += '<';
  out += tag;
  for (const auto& [name, value] : attributes) put(out, name, value);
  if (title.empty()) {
    out += "/>\n";
    return;
  }
  out += "><title>";
  out += xml_escape(title);
  out += "</title></";
  out += tag;
  out += ">\n";
}
}  // namespace

void Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view title,
               std::string_view css_class) {
  element(body_, "rect",
          {{"x", px(x)},
           {"y", px(y)},
           {"width", px(std::max(0.0, w))},
           {"height", px(std::max(0.0, h))},
           {"fill", std::string(fill)},
           {"class", std::string(css_class)}},
          title);
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view dash) {
  element(body_, "line",
          {{"x1", px(x1)},
           {"y1", px(y1)},
           {"x2", px(x2)},
           {"y2", px(y2)},
           {"stroke", std::string(stroke)},
           {"stroke-width", px(width)},
           {"stroke-dasharray", std::string(dash)}});
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width,
                   std::string_view dash) {
  std::string pts;
  for (const auto& [x, y] : points) {
    if (!pts.empty()) pts += ' ';
    pts += px(x);
    pts += ',';
    pts += px(y);
  }
  element(body_, "polyline",
          {{"points", pts},
           {"fill", "none"},
           {"stroke", std::string(stroke)},
           {"stroke-width", px(width)},
           {"stroke-dasharray", std::string(dash)},
           {"stroke-linejoin", "round"}});
}

void Svg::circle(double cx, double cy, double r, std::string_view fill, std::string_view title) {
  element(body_, "circle", {{"cx", px(cx)}, {"cy", px(cy)}, {"r", px(r)}, {"fill", std::string(fill)}}, title);
}

void Svg::text(double x, double y, std::string_view s, std::string_view anchor, double size_px,
               std::string_view fill, double rotate, bool bold) {
  body_ += "<text";
  put(body_, "x", px(x));
  put(body_, "y", px(y));
  put(body_, "text-anchor", anchor);
  put(body_, "font-size", px(size_px));
  put(body_, "fill", fill);
  if (bold) put(body_, "font-weight", "bold");
  if (rotate != 0) put(body_, "transform", "rotate(" + px(rotate) + " " + px(x) + " " + px(y) + ")");
  body_ += '>';
  body_ += xml_escape(s);
  body_ += "</text>\n";
}

void Svg::begin_group(std::string_view css_class) {
  body_ += "<g";
  put(body_, "class", css_class);
  body_ += ">\n";
  ++open_groups_;
}

void Svg::end_group() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

std::string Svg::str() const {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\"";
  put(s, "width", px(width_));
  put(s, "height", px(height_));
  put(s, "viewBox", "0 0 " + px(width_) + " " + px(height_));
  put(s, "class", class_);
  put(s, "font-family", "sans-serif");
  s += ">\n";
  s += body_;
  for (int i = 0; i < open_groups_; ++i) s += "</g>\n";
  return s + "</svg>\n";
}

}  // namespace mf::report
