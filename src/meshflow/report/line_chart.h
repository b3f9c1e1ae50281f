// Line charts: one or more series over a shared numeric x axis (steps), linear or log y.
#pragma once
#include <string>
#include <vector>

#include "meshflow/report/axes.h"
#include "meshflow/report/svg.h"

namespace mf::report {

// Points with a NaN (or, on a log axis, a non-positive) y are gaps in the line.
struct Series {
  std::string name, color;
  std::vector<double> x, y;
  bool dashed = false;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<Series> series;
};

// The axes a chart is drawn on: nice 1-2-5 ticks covering every drawn point, mapped onto the
// layout's plot area.
struct LineScales {
  Scale x, y;
  std::vector<double> x_ticks, y_ticks;
};
LineScales line_chart_scales(const LineChart& chart, const Layout& layout = {});

// The chart as an <svg>: frame, axes, a <polyline> per unbroken run of each series' points (dots
// at the points when a series has few), the legend below. "no data" when nothing is drawable.
std::string render_line_chart(const LineChart& chart, const Layout& layout = {});

}  // namespace mf::report
