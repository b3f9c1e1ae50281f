// MetricsWriter: the run's machine-readable log, `<dir>/metrics.jsonl` — one JSON object per
// line, flushed as written, so a crashed run leaves every completed line readable. Numbers are
// written as given, except a top-level float `loss`, which gets 9 significant digits ("%.9g").
// Resuming opens the file in append mode after dropping lines past the resumed step.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace mf {

class MetricsWriter {
 public:
  // Creates `dir` if needed. Without `resume_step` a fresh run: metrics.jsonl is truncated.
  // With it, existing lines whose "step" exceeds *resume_step (written after the checkpoint
  // being resumed from) and any torn last line are dropped — the file is rewritten atomically —
  // and new lines are appended.
  explicit MetricsWriter(const std::string& dir, std::optional<int64_t> resume_step = std::nullopt);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Appends `record` (an object; keys keep their insertion order) as one line and flushes.
  //   w.write({{"step", 10}, {"loss", 3.2}, {"lr", 6e-4}});
  void write(const nlohmann::ordered_json& record);

  const std::string& path() const { return path_; }

  // The line write() produces for `record`, without the newline.
  static std::string format_line(const nlohmann::ordered_json& record);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mf
