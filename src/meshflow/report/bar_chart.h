// Stacked bar charts: one bar per category (a rank), split into parts (memory kinds, parts of the
// step time), vertical or horizontal.
#pragma once
#include <string>
#include <vector>

#include "meshflow/report/axes.h"

namespace mf::report {

struct BarPart {
  std::string name, color;
  std::vector<double> values;  // one per category; missing, negative or NaN values draw nothing
};

struct StackedBars {
  std::string title, category_label, value_label;
  std::vector<std::string> categories;
  std::vector<BarPart> parts;  // stacked in this order, from the axis outwards
  bool horizontal = false;     // categories down the y axis, values along x
};

// The chart as an <svg>: a value axis from 0 with 1-2-5 ticks, each bar's parts stacked (a tooltip
// each), the parts' legend below. A horizontal chart grows with its categories (one row each) and
// widens its left margin to fit their names.
std::string render_stacked_bars(const StackedBars& chart, Layout layout = {});

}  // namespace mf::report
