#include "meshflow/report/report.h"

#include <filesystem>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/report/page.h"

namespace mf::report {

namespace fs = std::filesystem;

std::string default_output_dir(const std::vector<std::string>& run_dirs) {
  MF_CHECK(!run_dirs.empty(), "report: give at least one run folder");
  MF_CHECK(run_dirs.size() == 1, "report: several runs need --output DIR (the comparison's folder)");
  return (fs::path(run_dirs[0]) / "report").string();
}

ReportFiles write_report(const std::vector<std::string>& run_dirs, const std::string& output_dir) {
  MF_CHECK(!run_dirs.empty(), "report: give at least one run folder");
  std::vector<RunFiles> runs;
  for (const std::string& d : run_dirs) runs.push_back(load_run(d));
  const bool several = runs.size() > 1;
  std::vector<Figure> all = curve_figures(runs);
  const std::vector<Figure> curves = all;
  std::vector<RunSection> sections;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string prefix = several ? "run" + std::to_string(i + 1) + "-" : "";
    RunSection sec;
    sec.run = &runs[i];
    sec.figures = rank_figures(runs[i], prefix);
    if (runs[i].trace) {
      const TraceEvents events = read_trace_events(*runs[i].trace);
      sec.bubble = pipeline_bubble(events);
      sec.figures.push_back(timeline_figure(events, prefix));
    }
    all.insert(all.end(), sec.figures.begin(), sec.figures.end());
    sections.push_back(std::move(sec));
  }
  const std::string page = render_page(runs, curves, sections);
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  MF_CHECK(!ec, output_dir, ": cannot create the folder: ", ec.message());
  ReportFiles out;
  for (const RunFiles& r : runs) out.warnings.insert(out.warnings.end(), r.metrics.warnings.begin(), r.metrics.warnings.end());
  for (const Figure& f : all) {
    const std::string path = (fs::path(output_dir) / (f.id + ".svg")).string();
    write_file_atomic(path, f.svg);
    out.svg_files.push_back(path);
  }
  out.index_html = (fs::path(output_dir) / "index.html").string();
  write_file_atomic(out.index_html, page);
  return out;
}

}  // namespace mf::report
