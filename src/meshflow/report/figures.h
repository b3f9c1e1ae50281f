// The report's figures, made from run folders: the training curves (every run overlaid), and per
// run the memory and step time of each rank and the pipeline timeline of a profiled step.
#pragma once
#include <string>
#include <vector>

#include "meshflow/report/run_files.h"
#include "meshflow/report/trace_summary.h"

namespace mf::report {

struct Figure {
  std::string id;       // the SVG file's name without ".svg": "loss", "memory", "run2-memory"
  std::string caption;  // plain text: what is drawn and where it comes from
  std::string svg;      // the <svg> element, also written to <id>.svg
};

// Loss and validation loss, learning rate, gradient norm, tokens/s and MFU over steps; the
// legend names the runs when there are several. A chart no run has data for is left out.
std::vector<Figure> curve_figures(const std::vector<RunFiles>& runs);

// One run's per-rank figures from its last training line: memory by kind (stacked), step time in
// parts; `prefix` is put before the ids ("" or "run2-").
std::vector<Figure> rank_figures(const RunFiles& run, const std::string& prefix);

// The pipeline timeline of the trace's first profiled step (one row per rank). Its `id` is
// prefix + "timeline".
Figure timeline_figure(const TraceEvents& events, const std::string& prefix);

}  // namespace mf::report
