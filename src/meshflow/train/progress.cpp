// ProgressBar and its formatting helpers.
#include "meshflow/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace mf {

std::string format_duration(double s) {
  if (!(s >= 0) || std::isinf(s)) return "--";
  auto t = static_cast<int64_t>(std::llround(s));
  char buf[48];
  if (t < 60) std::snprintf(buf, sizeof(buf), "%llds", (long long)t);
  else if (t < 3600) std::snprintf(buf, sizeof(buf), "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  else if (t < 86400)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
  else std::snprintf(buf, sizeof(buf), "%lldd%02lldh", (long long)(t / 86400), (long long)(t % 86400 / 3600));
  return buf;
}

std::string format_rate(double r) {
  if (!std::isfinite(r)) return "--";
  char buf[48];
  static const char* units[] = {"", "k", "M", "G", "T"};
  double a = std::fabs(r);
  if (a < 10) {
    std::snprintf(buf, sizeof(buf), "%.1f", r);
    return buf;
  }
  if (a < 999.5) {
    std::snprintf(buf, sizeof(buf), "%.0f", r);
    return buf;
  }
  int u = 0;
  do {
    a /= 1000;
    r /= 1000;
    ++u;
  } while (a >= 999.95 && u < 4);
  std::snprintf(buf, sizeof(buf), "%.1f%s", r, units[u]);
  return buf;
}

std::string format_progress_line(int64_t done, int64_t total, double loss, double tokens_per_second,
                                 double eta_seconds, int bar_width) {
  double frac = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 0.0;
  int filled = static_cast<int>(frac * bar_width);
  std::string line = "[";
  line.append(filled, '#').append(bar_width - filled, '.').append("] ");
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%lld/%lld %d%% | loss %.2f | %s tok/s | ETA %s", (long long)done,
                (long long)total, static_cast<int>(frac * 100), loss, format_rate(tokens_per_second).c_str(),
                format_duration(eta_seconds).c_str());
  return line + buf;
}

namespace {
double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(int64_t total, std::FILE* out)
    : total_(total), out_(out), enabled_(out && ::isatty(::fileno(out))),
      eta_(std::numeric_limits<double>::quiet_NaN()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, double loss, double tokens_per_second) {
  update_at(done, loss, tokens_per_second, steady_seconds());
}

void ProgressBar::update_at(int64_t done, double loss, double tokens_per_second, double now) {
  if (!started_) {
    started_ = true;
    first_done_ = done;
    first_time_ = now;
  } else if (done > first_done_) {
    double per_step = (now - first_time_) / double(done - first_done_);
    eta_ = per_step * double(std::max<int64_t>(total_ - done, 0));
  }
  line_ = format_progress_line(done, total_, loss, tokens_per_second, eta_);
  if (!enabled_ || !out_) return;
  if (now - last_draw_ < 0.1 && done < total_) return;
  last_draw_ = now;
  std::string text = "\r" + line_;
  if (line_.size() < last_len_) text += std::string(last_len_ - line_.size(), ' ');  // erase leftovers
  last_len_ = line_.size();
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_ && out_) {
    std::fputs("\n", out_);
    std::fflush(out_);
  }
  drawn_ = false;
  last_len_ = 0;
}

}  // namespace mf
