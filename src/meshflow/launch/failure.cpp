// A failed job's cause, from the launcher's exit status and the lines its ranks and it printed.
#include "meshflow/launch/failure.h"

#include <csignal>
#include <cstring>
#include <regex>
#include <sys/wait.h>

namespace mf::launch {

ExitStatus exit_status_from_wait(int st) {
  ExitStatus s;
  if (WIFSIGNALED(st)) s.signal = WTERMSIG(st);
  else if (WIFEXITED(st)) s.code = WEXITSTATUS(st);
  return s;
}

std::string describe(const ExitStatus& s) {
  if (s.signal > 0) {
    const char* name = strsignal(s.signal);
    return "signal " + std::to_string(s.signal) + (name ? std::string(" (") + name + ")" : std::string());
  }
  return "exit code " + std::to_string(s.code);
}

namespace {
std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}
}  // namespace

Failure classify_failure(const ExitStatus& s, const std::vector<std::string>& lines) {
  // Open MPI: "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
  static const std::regex ompi_signal(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  // Slurm: "srun: error: node12: task 1: Killed" (or "Segmentation fault", "Exited with exit code 1").
  static const std::regex srun_task(R"(srun: error: (\S+): tasks? (\d+)[^:]*: (.*))");
  // Open MPI, a rank that exited non-zero: "  Process name: [[41651,1],2]".
  static const std::regex ompi_exit(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex mf_rank_error(R"(^meshflow: error: \[rank (\d+)/(\d+)\] (.*))");
  Failure f;
  int signal_rank = -1, exit_rank = -1, error_rank = -1;
  std::string signal_cause, error_cause;
  for (const std::string& raw : lines) {
    const std::string line = trimmed(raw);
    std::smatch m;
    if (signal_rank < 0 && std::regex_search(line, m, ompi_signal)) {
      signal_rank = std::stoi(m[1]);
      signal_cause = "rank " + m[1].str() + " died on node " + m[2].str() + ": signal " + m[3].str() +
                     (m[4].matched ? " (" + m[4].str() + ")" : std::string());
    } else if (signal_rank < 0 && std::regex_search(line, m, srun_task)) {
      const std::string what = m[3].str();
      const bool killed = what.find("exit code") == std::string::npos;
      if (killed) {
        signal_rank = std::stoi(m[2]);
        signal_cause = "rank " + m[2].str() + " died on node " + m[1].str() + ": " + what;
      } else if (exit_rank < 0) {
        exit_rank = std::stoi(m[2]);
      }
    } else if (exit_rank < 0 && std::regex_search(line, m, ompi_exit)) {
      exit_rank = std::stoi(m[1]);
    }
    if (line.rfind("meshflow: error:", 0) == 0 && line.find("terminated by the launcher") == std::string::npos) {
      if (f.errors.size() < 8) f.errors.push_back(line);
      if (error_rank < 0 && std::regex_search(line, m, mf_rank_error)) {
        error_rank = std::stoi(m[1]);
        error_cause = "rank " + m[1].str() + ": " + m[3].str();
      } else if (error_cause.empty()) {
        error_cause = line.substr(std::strlen("meshflow: error: "));
      }
    }
  }
  if (signal_rank >= 0) {
    f.cause = signal_cause;
    f.rank = signal_rank;
    f.rank_lost = true;
  } else if (!error_cause.empty()) {
    // The rank Open MPI names as the first to exit non-zero, when it also printed the line.
    f.cause = error_cause;
    f.rank = error_rank >= 0 ? error_rank : exit_rank;
  } else if (exit_rank >= 0) {
    f.cause = "rank " + std::to_string(exit_rank) + " exited non-zero (launcher: " + describe(s) + ")";
    f.rank = exit_rank;
  } else if (s.signal > 0) {
    f.cause = "the launcher was killed: " + describe(s);
    f.rank_lost = true;
  } else {
    f.cause = "the job ended with " + describe(s);
  }
  return f;
}

}  // namespace mf::launch
