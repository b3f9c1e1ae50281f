#include "meshflow/train/stop_signal.h"

#include "meshflow/comm/watchdog.h"

namespace mf::train {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void note_stop_signal(int sig) {
  if (g_stop_signal != 0) {  // the second: the default action, now
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    raise(sig);
    return;
  }
  g_stop_signal = sig;
  comm::Watchdog::forward_signal(sig, /*stop_request=*/true);
}
}  // namespace

StopOnSignal::StopOnSignal() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = note_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGUSR1, &sa, &old_usr1_);
}

StopOnSignal::~StopOnSignal() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int StopOnSignal::received() { return g_stop_signal; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace mf::train
