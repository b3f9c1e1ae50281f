#include "meshflow/report/line_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mf::report {

namespace {

constexpr size_t kMaxDottedPoints = 60;  // a series with at most this many points shows each as a dot

// Values past this magnitude are left out: the axes' span between two of them would overflow a
// double (a loss of 1e308 beside -1e308 once put NaN coordinates into the figure).
constexpr double kMaxPlotted = 1e300;

bool drawable(const LineChart& c, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && std::abs(x) <= kMaxPlotted && std::abs(y) <= kMaxPlotted &&
         (!c.log_y || y > 0);
}

struct Extent {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

}  // namespace

LineScales line_chart_scales(const LineChart& chart, const Layout& l) {
  Extent ex, ey;
  for (const Series& s : chart.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (drawable(chart, s.x[i], s.y[i])) {
        ex.add(s.x[i]);
        ey.add(s.y[i]);
      }
  if (ex.empty()) ex = {0, 1};
  if (ey.empty()) ey = chart.log_y ? Extent{1, 10} : Extent{0, 1};
  LineScales s;
  s.x_ticks = nice_ticks(ex.lo, ex.hi, 8);
  s.y_ticks = chart.log_y ? log_ticks(ey.lo, ey.hi) : nice_ticks(ey.lo, ey.hi, 6);
  s.x = Scale{s.x_ticks.front(), s.x_ticks.back(), l.plot_left(), l.plot_right(), false};
  s.y = Scale{s.y_ticks.front(), s.y_ticks.back(), l.plot_bottom(), l.plot_top(), chart.log_y};
  return s;
}

std::string render_line_chart(const LineChart& chart, const Layout& l) {
  std::vector<LegendEntry> legend;
  for (const Series& s : chart.series) legend.push_back({s.name, s.color, s.dashed, false});
  const double legend_h = chart.series.size() > 1 ? legend_height(legend, l.plot_right() - l.plot_left()) : 0;
  Svg svg(l.width, l.height + legend_h);
  draw_frame(svg, l, chart.title);
  const LineScales sc = line_chart_scales(chart, l);
  draw_x_axis(svg, l, sc.x, sc.x_ticks, chart.x_label);
  draw_y_axis(svg, l, sc.y, sc.y_ticks, chart.y_label);
  bool any = false;
  svg.begin_group("data");
  for (const Series& s : chart.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    size_t points = 0;
    for (size_t i = 0; i < n; ++i) points += drawable(chart, s.x[i], s.y[i]);
    std::vector<std::pair<double, double>> run;
    const auto flush = [&] {
      if (run.size() > 1) svg.polyline(run, s.color, 2, s.dashed ? "6 3" : "");
      run.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      if (!drawable(chart, s.x[i], s.y[i])) {
        flush();
        continue;
      }
      any = true;
      run.emplace_back(sc.x(s.x[i]), sc.y(s.y[i]));
      if (points <= kMaxDottedPoints)
        svg.circle(run.back().first, run.back().second, 3, s.color,
                   s.name + ": " + format_value(s.x[i]) + ", " + format_value(s.y[i]));
    }
    flush();
  }
  svg.end_group();
  if (!any)
    svg.text((l.plot_left() + l.plot_right()) / 2, (l.plot_top() + l.plot_bottom()) / 2, "no data", "middle", 14, "#888");
  if (legend_h > 0) draw_legend(svg, legend, l.plot_left(), l.height - 4, l.plot_right() - l.plot_left());
  return svg.str();
}

}  // namespace mf::report
