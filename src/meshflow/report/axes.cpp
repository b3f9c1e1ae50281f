#include "meshflow/report/axes.h"

#include <cmath>

namespace mf::report {

namespace {
constexpr double kLegendRow = 18;   // pixels per legend row
constexpr double kLegendMark = 22;  // the line or box before a name, and its gap
constexpr double kLegendGap = 16;   // between entries

double step_of(const std::vector<double>& ticks) { return ticks.size() > 1 ? ticks[1] - ticks[0] : 0; }
}  // namespace

double text_width(const std::string& s, double size_px) {
  // Count UTF-8 characters (not continuation bytes); an average sans-serif glyph is ~0.58 em.
  double n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n * size_px * 0.58;
}

void draw_frame(Svg& svg, const Layout& l, const std::string& title) {
  svg.text(l.plot_left(), 20, title, "start", 14, "#111", 0, true);
  svg.rect(l.plot_left(), l.plot_top(), l.plot_right() - l.plot_left(), l.plot_bottom() - l.plot_top(), "#fcfcfc", {},
           "plot-area");
}

void draw_x_axis(Svg& svg, const Layout& l, const Scale& x, const std::vector<double>& ticks, const std::string& label) {
  const double step = step_of(ticks);
  for (double t : ticks) {
    const double p = x(t);
    svg.line(p, l.plot_top(), p, l.plot_bottom(), "#e4e4e4");
    svg.line(p, l.plot_bottom(), p, l.plot_bottom() + 5, "#444");
    svg.text(p, l.plot_bottom() + 18, x.log ? format_tick(t, t) : format_tick(t, step), "middle", 11, "#333");
  }
  svg.line(l.plot_left(), l.plot_bottom(), l.plot_right(), l.plot_bottom(), "#444");
  svg.text((l.plot_left() + l.plot_right()) / 2, l.plot_bottom() + 38, label, "middle", 12, "#222");
}

void draw_y_axis(Svg& svg, const Layout& l, const Scale& y, const std::vector<double>& ticks, const std::string& label) {
  const double step = step_of(ticks);
  for (double t : ticks) {
    const double p = y(t);
    svg.line(l.plot_left(), p, l.plot_right(), p, "#e4e4e4");
    svg.line(l.plot_left() - 5, p, l.plot_left(), p, "#444");
    svg.text(l.plot_left() - 8, p + 4, y.log ? format_tick(t, t) : format_tick(t, step), "end", 11, "#333");
  }
  svg.line(l.plot_left(), l.plot_top(), l.plot_left(), l.plot_bottom(), "#444");
  const double cy = (l.plot_top() + l.plot_bottom()) / 2;
  svg.text(16, cy, label, "middle", 12, "#222", -90);
}

namespace {
// Calls place(entry, x, row) for each entry laid out in rows of `width` pixels; returns the rows.
template <class Place>
int lay_out(const std::vector<LegendEntry>& entries, double width, Place place) {
  if (entries.empty()) return 0;
  int row = 0;
  double x = 0;
  for (const LegendEntry& e : entries) {
    const double w = kLegendMark + text_width(e.name, 12);
    if (x > 0 && x + w > width) {
      ++row;
      x = 0;
    }
    place(e, x, row);
    x += w + kLegendGap;
  }
  return row + 1;
}
}  // namespace

double legend_height(const std::vector<LegendEntry>& entries, double width) {
  return lay_out(entries, width, [](const LegendEntry&, double, int) {}) * kLegendRow;
}

void draw_legend(Svg& svg, const std::vector<LegendEntry>& entries, double x0, double y0, double width) {
  svg.begin_group("legend");
  lay_out(entries, width, [&](const LegendEntry& e, double x, int row) {
    const double cy = y0 + row * kLegendRow + kLegendRow / 2;
    if (e.box) svg.rect(x0 + x, cy - 5, 14, 10, e.color);
    else svg.line(x0 + x, cy, x0 + x + 16, cy, e.color, 2.5, e.dashed ? "6 3" : "");
    svg.text(x0 + x + kLegendMark, cy + 4, e.name, "start", 12, "#222");
  });
  svg.end_group();
}

}  // namespace mf::report
