// The parts every chart shares: the pixel layout (a plot area inside margins), the title, the
// axes with their ticks and labels, and the legend drawn below the plot.
#pragma once
#include <string>
#include <vector>

#include "meshflow/report/svg.h"

namespace mf::report {

// A chart's size and the plot area inside it (pixels). The legend adds rows below `height`.
struct Layout {
  double width = 640, height = 320;
  double left = 76, right = 20, top = 34, bottom = 50;
  double plot_left() const { return left; }
  double plot_right() const { return width - right; }
  double plot_top() const { return top; }
  double plot_bottom() const { return height - bottom; }
};

// Width of `s` in pixels at `size_px`, estimated (no font metrics): for margins and labels that
// must fit inside a bar.
double text_width(const std::string& s, double size_px = 12);

// The title above the plot and the plot area's background: a <rect class="plot-area"> (the test
// of the page in a browser looks for drawn data inside it).
void draw_frame(Svg& svg, const Layout& l, const std::string& title);

// A numeric axis: tick labels, grid lines across the plot area, the axis label.
void draw_x_axis(Svg& svg, const Layout& l, const Scale& x, const std::vector<double>& ticks, const std::string& label);
void draw_y_axis(Svg& svg, const Layout& l, const Scale& y, const std::vector<double>& ticks, const std::string& label);

struct LegendEntry {
  std::string name, color;
  bool dashed = false;
  bool box = false;  // a filled square (bars) instead of a line (series)
};
// Height of the legend's rows when laid out in `width` pixels (0 for no entries).
double legend_height(const std::vector<LegendEntry>& entries, double width);
// Draws the legend's rows from (x, y) (the top of the first row) over `width` pixels.
void draw_legend(Svg& svg, const std::vector<LegendEntry>& entries, double x, double y, double width);

}  // namespace mf::report
