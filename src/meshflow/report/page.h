// The report's HTML page: self-contained (inline CSS, figures as inline <svg>, no network), with
// a small inline script that records each figure's plot area for tests (a hidden
// <pre id="figure-rects"> holding JSON).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "meshflow/report/figures.h"
#include "meshflow/report/run_files.h"
#include "meshflow/report/trace_summary.h"

namespace mf::report {

// One run's part of the page.
struct RunSection {
  const RunFiles* run = nullptr;
  std::vector<Figure> figures;          // per-rank figures, then the timeline when traced
  std::optional<PipelineBubble> bubble;  // when the run has a trace.json
};

std::string render_page(const std::vector<RunFiles>& runs, const std::vector<Figure>& curves,
                        const std::vector<RunSection>& sections);

}  // namespace mf::report
