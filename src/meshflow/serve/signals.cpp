#include "meshflow/serve/signals.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "meshflow/core/error.h"

namespace mf::serve {
namespace {

int g_pipe_write = -1;
volatile sig_atomic_t g_signals = 0;  // signals received

extern "C" void on_stop_signal(int sig) {
  if (g_signals > 0) _exit(128 + sig);
  g_signals = 1;
  const char byte = 's';
  ssize_t n = write(g_pipe_write, &byte, 1);
  (void)n;
}

}  // namespace

StopOnSignals::StopOnSignals(std::function<void()> stop) {
  MF_CHECK(g_pipe_write < 0, "serve: StopOnSignals is already installed");
  MF_CHECK(pipe(pipe_) == 0, "serve: pipe(): ", std::strerror(errno));
  g_pipe_write = pipe_[1];
  g_signals = 0;
  watcher_ = std::thread([fd = pipe_[0], stop = std::move(stop)] {
    char byte = 0;
    for (;;) {
      const ssize_t n = read(fd, &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || byte == 'q') return;
      stop();
    }
  });
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  const char byte = 'q';
  ssize_t n = write(pipe_[1], &byte, 1);
  (void)n;
  watcher_.join();
  g_pipe_write = -1;
  close(pipe_[0]);
  close(pipe_[1]);
}

}  // namespace mf::serve
