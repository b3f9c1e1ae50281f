// SIGINT and SIGTERM stop a server cleanly: the handler only writes a byte to a pipe
// (async-signal-safe), a thread reading the pipe calls the stop function. A second signal ends
// the process at once (exit status 128 + the signal).
#pragma once
#include <csignal>
#include <functional>
#include <thread>

namespace mf::serve {

class StopOnSignals {
 public:
  explicit StopOnSignals(std::function<void()> stop);
  ~StopOnSignals();  // restores the previous handlers
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  int pipe_[2] = {-1, -1};
  struct sigaction old_int_ {}, old_term_ {};
  std::thread watcher_;
};

}  // namespace mf::serve
