// MetricsWriter: JSON-lines metrics with a fixed-precision loss, flushed per line, resumable.
#include "meshflow/train/metrics_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf {

namespace {

// Keeps the complete, parseable lines of an existing metrics file with step <= max_step.
std::string kept_lines(const std::string& path, int64_t max_step) {
  std::string text = read_file(path);
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof() && !text.empty() && text.back() != '\n') break;  // torn last line
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    auto step = j.find("step");
    if (step != j.end() && step->is_number() && step->get<double>() > static_cast<double>(max_step)) continue;
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& dir, std::optional<int64_t> resume_step) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MF_CHECK(!ec, "cannot create directory ", dir, ": ", ec.message());
  path_ = (std::filesystem::path(dir) / "metrics.jsonl").string();
  if (resume_step && std::filesystem::exists(path_)) write_file_atomic(path_, kept_lines(path_, *resume_step));
  file_ = std::fopen(path_.c_str(), resume_step ? "a" : "w");
  MF_CHECK(file_, "cannot open ", path_, ": ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

std::string MetricsWriter::format_line(const nlohmann::ordered_json& record) {
  MF_CHECK(record.is_object(), "metrics record must be a JSON object, got ", record.dump());
  std::string line = "{";
  bool first = true;
  for (auto it = record.begin(); it != record.end(); ++it) {
    if (!first) line += ',';
    first = false;
    line += nlohmann::ordered_json(it.key()).dump();
    line += ':';
    const auto& v = it.value();
    if (it.key() == "loss" && v.is_number_float() && std::isfinite(v.get<double>())) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", v.get<double>());
      line += buf;
    } else {
      line += v.dump();  // non-finite numbers become null: JSON has no NaN
    }
  }
  return line + "}";
}

void MetricsWriter::write(const nlohmann::ordered_json& record) {
  std::string line = format_line(record);
  line += '\n';
  MF_CHECK(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0,
           "write to ", path_, " failed: ", std::strerror(errno));
}

}  // namespace mf
