// A timeline (Gantt chart): one row per rank, a coloured bar per span, coloured by its kind.
#pragma once
#include <string>
#include <vector>

#include "meshflow/report/axes.h"

namespace mf::report {

struct TimelineKind {
  std::string name, color;
  // Drawn as a thin strip along the bottom of the row, over the other bars: for spans nested in
  // them (a collective's wait inside a forward) that would otherwise hide them.
  bool strip = false;
};

struct TimelineBar {
  size_t row = 0, kind = 0;  // indices into Timeline::rows and Timeline::kinds
  double start = 0, end = 0;  // x-axis units
  std::string label;          // drawn inside the bar when it fits
  std::string tooltip;
};

struct Timeline {
  std::string title, x_label;
  std::vector<std::string> rows;
  std::vector<TimelineKind> kinds;
  std::vector<TimelineBar> bars;
};

// The chart as an <svg>: a time axis with 1-2-5 ticks over the bars' extent, one row per entry of
// `rows` (named on the left), the kinds' legend below.
std::string render_timeline(const Timeline& timeline, Layout layout = {});

}  // namespace mf::report
