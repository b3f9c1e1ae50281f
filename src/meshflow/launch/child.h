// One attempt of a supervised job: the launcher process started from an argv vector (fork +
// execv, no shell), its stdout shared with ours, its stderr copied to ours as it comes and its
// last lines kept; SIGINT, SIGTERM and SIGUSR1 sent to the supervisor meanwhile are passed on to
// it as SIGUSR1, which asks the ranks to stop after a step with a checkpoint.
#pragma once
#include <string>
#include <vector>

#include "meshflow/launch/failure.h"

namespace mf::launch {

// Installs SIGINT/SIGTERM/SIGUSR1 handlers that only note the signal (restored on destruction):
// the supervisor passes it on to its child and stops restarting.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  static int received();  // the last signal caught, 0 when none
  static int count();     // signals caught so far
};

struct ChildResult {
  ExitStatus status;
  std::vector<std::string> stderr_lines;  // its last lines (up to `keep_lines`)
  int forwarded_signal = 0;               // the stop signal received (passed on as SIGUSR1), 0 when none
};

// Runs argv (argv[0] a path to an executable) to its end. The child gets /dev/null as stdin, its
// own process group, and SIGTERM should the supervisor die. A first stop signal is passed on as
// SIGUSR1; a second kills the child's process group (SIGKILL).
ChildResult run_child(const std::vector<std::string>& argv, size_t keep_lines = 400);

// The executable `name` names: itself when it holds a '/', else the first match on PATH; "" when
// none.
std::string find_executable(const std::string& name);

}  // namespace mf::launch
