// Stopping a run cleanly on a signal (Megatron-LM's --exit-signal-handler). While a StopOnSignal
// guard lives, SIGTERM, SIGINT and SIGUSR1 (what Slurm sends before the time limit with
// --signal=USR1@SECONDS) only note the signal: the handler sets a volatile sig_atomic_t. The
// trainer reads it at the end of each step, over every rank (a signal may reach only some), so
// that every rank saves the same step and returns. A second signal ends the process at once (the
// default action). Under a failure watchdog (comm/watchdog.h) the signal also makes it look at its
// peers at once: a dead peer is still named as the cause; none is not a failure.
#pragma once
#include <csignal>
#include <string>

namespace mf::train {

class StopOnSignal {
 public:
  StopOnSignal();   // installs the handlers and clears the noted signal
  ~StopOnSignal();  // restores the previous handlers
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  static int received();  // the signal noted, 0 when none

 private:
  struct sigaction old_term_ {}, old_int_ {}, old_usr1_ {};
};

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string signal_name(int sig);

}  // namespace mf::train
