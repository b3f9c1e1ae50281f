#include "meshflow/report/bar_chart.h"

#include <algorithm>
#include <cmath>

namespace mf::report {

namespace {

constexpr double kRowPx = 28;  // a horizontal chart's pixels per category

double value_at(const BarPart& p, size_t i) {
  const double v = i < p.values.size() ? p.values[i] : 0;
  return std::isfinite(v) && v > 0 ? v : 0;
}

// A category's name under a vertical bar: cut before " (" when it is wider than the bar's band
// ("rank 3 (stage 1, dp 0, tp 1)" -> "rank 3"; the tooltips keep the whole name).
std::string fit(const std::string& name, double band_px) {
  const size_t cut = name.find(" (");
  return text_width(name, 11) <= band_px * 0.95 || cut == std::string::npos ? name : name.substr(0, cut);
}

}  // namespace

std::string render_stacked_bars(const StackedBars& c, Layout l) {
  const size_t n = c.categories.size();
  if (c.horizontal) {
    double widest = 0;
    for (const std::string& name : c.categories) widest = std::max(widest, text_width(name, 11));
    l.left = std::max(l.left, widest + 24);
    l.height = l.top + l.bottom + kRowPx * static_cast<double>(std::max<size_t>(n, 1));
  }
  double total_max = 0;
  for (size_t i = 0; i < n; ++i) {
    double total = 0;
    for (const BarPart& p : c.parts) total += value_at(p, i);
    total_max = std::max(total_max, total);
  }
  std::vector<LegendEntry> legend;
  for (const BarPart& p : c.parts) legend.push_back({p.name, p.color, false, true});
  const double legend_h = legend_height(legend, l.plot_right() - l.plot_left());
  Svg svg(l.width, l.height + legend_h);
  draw_frame(svg, l, c.title);
  const std::vector<double> ticks = nice_ticks(0, total_max > 0 ? total_max : 1, 6);
  const double band = (c.horizontal ? l.plot_bottom() - l.plot_top() : l.plot_right() - l.plot_left()) /
                      static_cast<double>(std::max<size_t>(n, 1));
  const double thickness = std::min(band * 0.65, 60.0);
  // Category names: every k-th when they would overlap.
  const size_t label_every = c.horizontal ? 1 : std::max<size_t>(1, static_cast<size_t>(std::ceil(44.0 / band)));
  Scale value;
  if (c.horizontal) {
    value = Scale{ticks.front(), ticks.back(), l.plot_left(), l.plot_right(), false};
    draw_x_axis(svg, l, value, ticks, c.value_label);
    svg.text(16, (l.plot_top() + l.plot_bottom()) / 2, c.category_label, "middle", 12, "#222", -90);
  } else {
    value = Scale{ticks.front(), ticks.back(), l.plot_bottom(), l.plot_top(), false};
    draw_y_axis(svg, l, value, ticks, c.value_label);
    svg.line(l.plot_left(), l.plot_bottom(), l.plot_right(), l.plot_bottom(), "#444");
    svg.text((l.plot_left() + l.plot_right()) / 2, l.plot_bottom() + 38, c.category_label, "middle", 12, "#222");
  }
  svg.begin_group("data");
  for (size_t i = 0; i < n; ++i) {
    const double centre = (c.horizontal ? l.plot_top() : l.plot_left()) + band * (static_cast<double>(i) + 0.5);
    if (c.horizontal) svg.text(l.plot_left() - 8, centre + 4, c.categories[i], "end", 11, "#333");
    else if (i % label_every == 0) svg.text(centre, l.plot_bottom() + 18, fit(c.categories[i], band), "middle", 11, "#333");
    double base = 0;
    for (const BarPart& p : c.parts) {
      const double v = value_at(p, i);
      if (v <= 0) continue;
      const double a = value(base), b = value(base + v);
      const std::string tip = c.categories[i] + ", " + p.name + ": " + format_value(v);
      if (c.horizontal) svg.rect(a, centre - thickness / 2, b - a, thickness, p.color, tip);
      else svg.rect(centre - thickness / 2, b, thickness, a - b, p.color, tip);
      base += v;
    }
  }
  svg.end_group();
  if (total_max <= 0)
    svg.text((l.plot_left() + l.plot_right()) / 2, (l.plot_top() + l.plot_bottom()) / 2, "no data", "middle", 14, "#888");
  draw_legend(svg, legend, l.plot_left(), l.height - 4, l.plot_right() - l.plot_left());
  return svg.str();
}

}  // namespace mf::report
