// Failure detection beside the communicator, independent of the launcher: each rank's watchdog
// thread publishes a heartbeat file and watches its peers' files, so a dead or stopped rank is
// noticed by meshflow itself — under mpirun (which kills the survivors) and under launchers that
// leave them waiting (srun, ranks started one by one, mpirun with orte_enable_recovery).
//
// Heartbeat: <dir>/rank_NNNNN, one fixed-size text line rewritten in place every period_s:
//   "mfhb1 <pid> <beat> <step> <finished 0|1> <blame> <host> <state>\n"
// state is the collective this rank waits in ("waiting in all_reduce f32(8,) on rank 1 of group
// [0, 1] (world ranks)") or "computing". A rank whose watchdog ends it writes a last line with
// blame = the rank it found failed and state = why, so that every survivor names that rank (not
// the one that left first). A peer has failed when
//   - its process is gone (a peer on this host: its pid no longer runs), or
//   - its beat has not advanced for stale_s (a stopped, frozen or unreachable peer);
// the watchdog then prints one line naming the failed rank, its last step and state, and what
// this rank was doing, and ends the process with status 1 (no unwinding: other threads may sit
// in MPI) once every other survivor has named the failed rank too, or after 3 periods: a launcher
// like mpirun ends the whole job when one rank exits, and a survivor killed by it before its own
// watchdog looked would say nothing of its own. A peer that finished (clean exit) is never
// judged. Peers on hosts that do not share <dir> are never seen, so never judged: the collective
// timeout covers them.
//
// The launcher's SIGTERM (a peer failed and mpirun ends the job): the signal handler hands the
// signal to the watchdog (forward_signal()), which names the peer that died before exiting 143.
// While the trainer takes signals as a request to stop (train/stop_signal.h), a signal with no
// failed peer is left to it.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mf::comm {

class Communicator;

// ---- process-wide progress, published in the heartbeat.
void note_step(int64_t step);  // the training step this rank works on
int64_t current_step();

// While alive, this rank is waiting in `what` (a collective's description). Nested notes keep
// the innermost; cheap enough for every slow wait (a mutex and a string copy).
class WaitNote {
 public:
  explicit WaitNote(const std::string& what);
  ~WaitNote();
  WaitNote(const WaitNote&) = delete;
  WaitNote& operator=(const WaitNote&) = delete;

 private:
  std::string previous_;
};
std::string current_wait();  // "" while computing

// One parsed heartbeat line.
struct Heartbeat {
  int64_t pid = 0, beat = 0, step = 0;
  bool finished = false;
  int64_t blame = -1;  // >= 0: this rank is ending because that rank failed (state says why)
  std::string host, state;
};
std::string format_heartbeat(const Heartbeat& h);                 // the fixed-size line
std::optional<Heartbeat> parse_heartbeat(const std::string& line);  // nullopt: torn or foreign

// The judgement, apart from threads and files (unit-tested): fed each peer's latest heartbeat
// (or none) and the monotonic time, says which peer failed and why.
class PeerMonitor {
 public:
  PeerMonitor(int rank, int world_size, std::string host, double stale_s);
  // A peer's heartbeat as read at now_s (seconds, monotonic); nullopt when unreadable.
  void observe(int peer, const std::optional<Heartbeat>& h, double now_s);
  // This rank's own loop was late (frozen, stopped): forget the ages, they measured nothing.
  void restart_clocks(double now_s);
  // The first failed peer and a description ("rank 2 (pid 123 on host h) died at step 7 while
  // computing"), or -1. pid_alive tells whether a process of this host runs.
  int failed(double now_s, std::string* why, bool (*pid_alive)(int64_t) = nullptr) const;
  // Whether every other peer has named the failed rank itself, or needs not: true when each peer
  // but this rank and `failed_rank` has published a blame, finished, died (on this host), gone
  // silent for stale_s, or was never seen (a host that does not share the folder).
  bool all_told(int failed_rank, double now_s, bool (*pid_alive)(int64_t) = nullptr) const;

 private:
  struct Peer {
    std::optional<Heartbeat> last;
    double changed_s = 0;  // when last.beat last advanced (or was first seen)
  };
  // A seen peer's process gone (on this host), its beat silent for stale_s, or neither.
  enum class Fate { kRunning, kDied, kSilent };
  Fate fate(const Peer& p, double now_s, bool (*pid_alive)(int64_t)) const;
  int rank_;
  std::string host_;
  double stale_s_;
  std::vector<Peer> peers_;
};

bool process_alive(int64_t pid);  // on this host: runs (not gone, not a zombie)
std::string host_name();

class Watchdog {
 public:
  // Collective over `world` (every rank calls it): writes this rank's first heartbeat under
  // `dir`, then a barrier, then the thread starts. period_s: how often it beats and looks;
  // stale_s: a peer silent this long has failed.
  Watchdog(Communicator& world, const std::string& dir, double period_s, double stale_s);
  // Marks this rank finished (peers stop judging it) and stops the thread.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Async-signal-safe. With a watchdog running, hands `sig` to it and returns true; false
  // otherwise. The watchdog looks at its peers at once: one that failed is named and the process
  // exits 128 + sig; none failed: a launcher's termination (stop_request false) is explained as a
  // peer's failure elsewhere and the process exits, a stop request (the trainer stops cleanly,
  // train/stop_signal.h) is not a failure and the watchdog goes on watching.
  static bool forward_signal(int sig, bool stop_request = false);

 private:
  void run();
  void look(PeerMonitor& monitor, double now_s) const;  // every peer's heartbeat file, read now
  void beat(bool finished, int64_t blame = -1, const std::string& why = "");
  // Prints the one line (and, with blame >= 0, publishes it first). Returns; the caller exits.
  void announce(const std::string& line, int64_t blame = -1);
  // Waits, at most 3 periods, until every other peer has named the failed rank; a wake-up (the
  // launcher's signal, the main thread ending) cuts it short.
  void linger(PeerMonitor& monitor, int failed_rank);

  int rank_, size_;
  std::string dir_, host_;
  double period_s_, stale_s_;
  int fd_ = -1;             // this rank's heartbeat file
  int wake_[2] = {-1, -1};  // self-pipe: a forwarded signal, or the stop request
  int64_t beats_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mf::comm
