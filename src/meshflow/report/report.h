// `meshflow report RUN_DIR [RUN_DIR ...]` as a library call: reads the run folders, writes
// index.html (self-contained) and each figure as <id>.svg into the output folder.
#pragma once
#include <string>
#include <vector>

namespace mf::report {

struct ReportFiles {
  std::string index_html;              // the page's path
  std::vector<std::string> svg_files;  // the figures' paths
  std::vector<std::string> warnings;   // what the run folders' files lacked (load_metrics)
};

// The default output folder: RUN_DIR/report for one run. Several runs need an explicit one
// (throws mf::Error saying so), so that a comparison never replaces a run's own report.
std::string default_output_dir(const std::vector<std::string>& run_dirs);

// Throws mf::Error naming the file (and line) that cannot be read.
ReportFiles write_report(const std::vector<std::string>& run_dirs, const std::string& output_dir);

}  // namespace mf::report
