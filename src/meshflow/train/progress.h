// ProgressBar: the console progress line
//   [####................] 120/500 24% | loss 3.21 | 1.2k tok/s | ETA 3m12s
// redrawn in place with '\r', only when the stream is a terminal (isatty); otherwise it prints
// nothing (the trainer writes its log lines separately). The ETA is the mean step time since
// the first update times the steps left. The formatting helpers are free functions.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace mf {

// 45 → "45s", 192 → "3m12s", 3725 → "1h02m", 183600 → "2d03h"; negative or NaN → "--".
std::string format_duration(double seconds);
// 950 → "950", 1234 → "1.2k", 12345 → "12.3k", 1.5e6 → "1.5M", 3e9 → "3.0G", 2.5 → "2.5".
std::string format_rate(double per_second);
// The whole line; eta_seconds NaN → "ETA --".
std::string format_progress_line(int64_t done, int64_t total, double loss, double tokens_per_second,
                                 double eta_seconds, int bar_width = 20);

class ProgressBar {
 public:
  // `total` steps; draws on `out` only when it is a terminal.
  explicit ProgressBar(int64_t total, std::FILE* out = stdout);
  ~ProgressBar();  // finish()

  // After `done` of `total` steps have finished. Redraws at most every 0.1 s, and always at
  // the last step.
  void update(int64_t done, double loss, double tokens_per_second);
  // The same with an explicit clock (seconds, any origin): for tests.
  void update_at(int64_t done, double loss, double tokens_per_second, double now_seconds);
  // Ends the line with '\n' if anything was drawn; the next update starts a fresh line.
  void finish();

  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }  // force on (tests) or off (--quiet)
  // Mean-step-time estimate after the last update; NaN before two updates.
  double eta_seconds() const { return eta_; }
  const std::string& last_line() const { return line_; }

 private:
  int64_t total_;
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  bool started_ = false;
  int64_t first_done_ = 0;
  double first_time_ = 0, last_draw_ = -1e300, eta_;
  size_t last_len_ = 0;
  std::string line_;
};

}  // namespace mf
