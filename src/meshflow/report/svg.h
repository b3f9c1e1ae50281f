// A small SVG writer for the run report: escaped text, 1-2-5 axis ticks, a scale from data to
// pixels, and an element builder. No plotting library: the charts (charts.h) draw with this.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mf::report {

// Text for XML (SVG files, HTML): & < > " ' escaped; control characters other than tab and
// newline, and bytes that are not UTF-8, become U+FFFD.
std::string xml_escape(std::string_view text);

// The 1-2-5 step (1, 2 or 5 times a power of ten) that cuts [lo, hi] into at most `max_ticks`
// intervals, the smallest such step.
double nice_step(double lo, double hi, int max_ticks = 6);
// The multiples of nice_step(lo, hi, max_ticks) from the last at or below `lo` to the first at or
// above `hi`: the axis runs from the first to the last.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 6);
// Log axis: the powers of ten covering [lo, hi] (lo > 0), with 2 and 5 times them when the range
// spans fewer than three decades.
std::vector<double> log_ticks(double lo, double hi);
// A tick label of an axis with ticks `step` apart (the step picks the form for every label): enough
// decimals for the step; k/M/G for steps of 1000 and more, scientific for steps below 10^-3.
std::string format_tick(double value, double step);
// A number for tables and tooltips: 4 significant digits.
std::string format_value(double value);

// Data interval [lo, hi] onto the pixel interval [px_lo, px_hi] (px_hi may be below px_lo: y
// axes grow upwards), linear or log10.
struct Scale {
  double lo = 0, hi = 1;
  double px_lo = 0, px_hi = 1;
  bool log = false;
  double operator()(double v) const;
};

// Colour of the i-th series (a fixed palette of 10, cycled).
const char* palette(size_t i);

// Builds one <svg> element. Coordinates in pixels, text escaped here.
class Svg {
 public:
  Svg(double width_px, double height_px, std::string_view css_class = "chart");

  // `title` (optional) is a tooltip: an SVG <title> child.
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view title = {},
            std::string_view css_class = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view dash = {});
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double width = 1.5,
                std::string_view dash = {});
  void circle(double cx, double cy, double r, std::string_view fill, std::string_view title = {});
  // anchor: start, middle or end; rotate: degrees around (x, y).
  void text(double x, double y, std::string_view s, std::string_view anchor = "start", double size_px = 12,
            std::string_view fill = "#222", double rotate = 0, bool bold = false);
  void begin_group(std::string_view css_class);
  void end_group();

  double width() const { return width_; }
  double height() const { return height_; }
  std::string str() const;  // the whole <svg>...</svg>

 private:
  double width_, height_;
  std::string class_, body_;
  int open_groups_ = 0;
};

// A coordinate in the SVG text: at most 2 decimals, trailing zeros dropped.
std::string px(double v);

}  // namespace mf::report
