#include "meshflow/report/timeline.h"

#include <algorithm>
#include <limits>

namespace mf::report {

namespace {
constexpr double kRowPx = 30;   // pixels per row
constexpr double kBarPx = 20;   // a bar's height in its row
constexpr double kStripPx = 5;  // a strip kind's height, at the bottom of the bar
}  // namespace

std::string render_timeline(const Timeline& t, Layout l) {
  double widest = 0;
  for (const std::string& r : t.rows) widest = std::max(widest, text_width(r, 11));
  l.left = std::max(l.left, widest + 16);
  l.height = l.top + l.bottom + kRowPx * static_cast<double>(std::max<size_t>(t.rows.size(), 1));
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const TimelineBar& b : t.bars) {
    lo = std::min(lo, b.start);
    hi = std::max(hi, b.end);
  }
  if (t.bars.empty()) lo = 0, hi = 1;
  std::vector<LegendEntry> legend;
  for (const TimelineKind& k : t.kinds) legend.push_back({k.name, k.color, false, true});
  const double legend_h = legend_height(legend, l.plot_right() - l.plot_left());
  Svg svg(l.width, l.height + legend_h);
  draw_frame(svg, l, t.title);
  const std::vector<double> ticks = nice_ticks(lo, hi, 10);
  const Scale x{ticks.front(), ticks.back(), l.plot_left(), l.plot_right(), false};
  draw_x_axis(svg, l, x, ticks, t.x_label);
  for (size_t r = 0; r < t.rows.size(); ++r)
    svg.text(l.plot_left() - 8, l.plot_top() + kRowPx * (static_cast<double>(r) + 0.5) + 4, t.rows[r], "end", 11, "#333");
  svg.begin_group("data");
  for (bool strips : {false, true})
    for (const TimelineBar& b : t.bars) {
      if (b.row >= t.rows.size() || b.kind >= t.kinds.size() || t.kinds[b.kind].strip != strips) continue;
      const double x0 = x(b.start), x1 = std::max(x(b.end), x0 + 0.5);  // every span at least half a pixel
      const double top = l.plot_top() + kRowPx * static_cast<double>(b.row) + (kRowPx - kBarPx) / 2;
      const double y = strips ? top + kBarPx - kStripPx : top, h = strips ? kStripPx : kBarPx;
      svg.rect(x0, y, x1 - x0, h, t.kinds[b.kind].color, b.tooltip);
      if (!strips && !b.label.empty() && text_width(b.label, 10) + 4 < x1 - x0)
        svg.text((x0 + x1) / 2, y + kBarPx / 2 + 3, b.label, "middle", 10, "#fff");
    }
  svg.end_group();
  if (t.bars.empty())
    svg.text((l.plot_left() + l.plot_right()) / 2, (l.plot_top() + l.plot_bottom()) / 2, "no data", "middle", 14, "#888");
  draw_legend(svg, legend, l.plot_left(), l.height - 4, l.plot_right() - l.plot_left());
  return svg.str();
}

}  // namespace mf::report
