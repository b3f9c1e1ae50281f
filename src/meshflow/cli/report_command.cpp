// `meshflow report`: an HTML report of training runs, each figure also an SVG file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/cli/commands.h"
#include "meshflow/report/report.h"

namespace mf::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> runs;
  std::string output;  // default: RUN_DIR/report (one run)
};

int run_report(const ReportArgs& a) {
  const std::string out = a.output.empty() ? mf::report::default_output_dir(a.runs) : a.output;
  const mf::report::ReportFiles files = mf::report::write_report(a.runs, out);
  for (const std::string& w : files.warnings) std::fprintf(stderr, "meshflow: warning: %s\n", w.c_str());
  std::printf("wrote %s and %zu figures (.svg) beside it\n", files.index_html.c_str(), files.svg_files.size());
  return 0;
}

class ReportCommand final : public Command {
 public:
  CLI::App* add(CLI::App& app) override {
    auto* rep = app.add_subcommand("report", "Write an HTML report of training runs (self-contained, works offline) "
                                   "with each figure also as an SVG file");
    rep->add_option("runs", a_.runs, "run folders written by meshflow train (metrics.jsonl, config.yaml, and "
                    "trace.json when profiled); several are overlaid in the curves")
        ->required();
    rep->add_option("--output", a_.output,
                    "folder for index.html and the figures' .svg files (default for one run: RUN_DIR/report; "
                    "required for several)");
    rep->footer("The page: loss and validation loss, learning rate, gradient norm, tokens/s and MFU over steps; each "
                "rank's memory by kind and step time in parts (the last training line); with trace.json, the "
                "pipeline timeline of the first profiled step and the measured bubble beside the schedule's; the "
                "config.\nExamples:\n  meshflow report output/gpt2_tiny-X   # -> output/gpt2_tiny-X/report/index.html\n"
                "  meshflow report runs/a runs/b --output compare/");
    return rep;
  }

  int run(const comm::CommPtr&) override { return run_report(a_); }

 private:
  ReportArgs a_;
};

}  // namespace

std::unique_ptr<Command> report_command() { return std::make_unique<ReportCommand>(); }

}  // namespace mf::cli
