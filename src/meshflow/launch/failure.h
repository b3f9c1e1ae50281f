// Why a job failed, read from its exit status and the last lines of its stderr: which rank died
// or failed first, and whether a rank was lost (killed by a signal) or reported an error.
#pragma once
#include <string>
#include <vector>

namespace mf::launch {

// How a process ended: killed by `signal` (> 0), else exited with `code`.
struct ExitStatus {
  int code = 0;
  int signal = 0;
  bool ok() const { return code == 0 && signal == 0; }
};
// From a waitpid() status.
ExitStatus exit_status_from_wait(int wait_status);
// "exit code 1", "signal 9 (Killed)".
std::string describe(const ExitStatus& s);

struct Failure {
  std::string cause;                // one line: what ended the job
  int rank = -1;                    // the rank that died or failed first, -1 when unknown
  bool rank_lost = false;           // a rank (or the launcher) was killed by a signal
  std::vector<std::string> errors;  // the ranks' own "meshflow: error:" lines (not the ones saying
                                    // they were terminated because another rank failed), at most 8
};

// The failure of a job whose launcher ended with `s` and printed `stderr_lines` (the last ones):
// Open MPI's "process rank R ... exited on signal S" notice and Slurm's "task R: Killed" name a
// lost rank; else the first "meshflow: error: [rank R/N] ..." line of a rank that failed itself,
// or Open MPI's "Process name: [[J,V],R]" of the first rank that exited non-zero; else the
// launcher's exit status.
Failure classify_failure(const ExitStatus& s, const std::vector<std::string>& stderr_lines);

}  // namespace mf::launch
