// The heartbeat watchdog (see watchdog.h).
#include "meshflow/comm/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "meshflow/comm/communicator.h"
#include "meshflow/core/error.h"

namespace mf::comm {

namespace {

constexpr size_t kLineBytes = 512;  // every heartbeat line, padded: rewritten in place

std::atomic<int64_t> g_step{0};
std::mutex g_wait_mutex;
std::string g_wait;                 // guarded by g_wait_mutex
constexpr int kSignalBits = 63;      // the forwarded byte: the signal number,
constexpr int kStopRequestBit = 64;  // and whether it asks the trainer to stop (not a termination)
std::atomic<int> g_signal_fd{-1};   // the running watchdog's self-pipe (write end)

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string fmt_seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", s);
  return b;
}

std::string peer_file(const std::string& dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d", rank);
  return (std::filesystem::path(dir) / name).string();
}

std::optional<Heartbeat> read_heartbeat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[kLineBytes + 1];
  const ssize_t n = ::pread(fd, buf, kLineBytes, 0);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  return parse_heartbeat(std::string(buf, static_cast<size_t>(n)));
}

std::string doing(int64_t step, const std::string& state) {
  return (state.empty() || state == "computing" ? std::string("computing") : state) + " at step " +
         std::to_string(step);
}

}  // namespace

// ---- progress

void note_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

WaitNote::WaitNote(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_wait_mutex);
  previous_ = std::move(g_wait);
  g_wait = "waiting in " + what;
}

WaitNote::~WaitNote() {
  std::lock_guard<std::mutex> lock(g_wait_mutex);
  g_wait = std::move(previous_);
}

std::string current_wait() {
  std::lock_guard<std::mutex> lock(g_wait_mutex);
  return g_wait;
}

// ---- heartbeat lines

std::string format_heartbeat(const Heartbeat& h) {
  std::string state = h.state.empty() ? std::string("computing") : h.state;
  for (char& c : state)
    if (c == '\n' || c == '\r') c = ' ';
  std::string line = "mfhb1 " + std::to_string(h.pid) + " " + std::to_string(h.beat) + " " + std::to_string(h.step) +
                     " " + (h.finished ? "1" : "0") + " " + std::to_string(h.blame) + " " + (h.host.empty() ? std::string("?") : h.host) + " " + state;
  if (line.size() > kLineBytes - 1) line.resize(kLineBytes - 1);
  line.resize(kLineBytes - 1, ' ');
  return line + "\n";
}

std::optional<Heartbeat> parse_heartbeat(const std::string& line) {
  if (line.size() != kLineBytes || line.back() != '\n' || line.rfind("mfhb1 ", 0) != 0) return std::nullopt;
  std::istringstream in(line.substr(6));
  Heartbeat h;
  int finished = -1;
  if (!(in >> h.pid >> h.beat >> h.step >> finished >> h.blame >> h.host) || (finished != 0 && finished != 1) ||
      h.pid <= 0 || h.blame < -1)
    return std::nullopt;
  h.finished = finished == 1;
  std::getline(in, h.state);
  const size_t a = h.state.find_first_not_of(' ');
  const size_t b = h.state.find_last_not_of(" \n");
  h.state = a == std::string::npos ? std::string() : h.state.substr(a, b - a + 1);
  return h;
}

// ---- judgement

PeerMonitor::PeerMonitor(int rank, int world_size, std::string host, double stale_s)
    : rank_(rank), host_(std::move(host)), stale_s_(stale_s), peers_(static_cast<size_t>(world_size)) {}

void PeerMonitor::observe(int peer, const std::optional<Heartbeat>& h, double now_s) {
  Peer& p = peers_.at(static_cast<size_t>(peer));
  if (!h) return;  // unreadable now (torn, being created): its age keeps growing
  if (!p.last || p.last->beat != h->beat || p.last->pid != h->pid) p.changed_s = now_s;
  p.last = h;
}

void PeerMonitor::restart_clocks(double now_s) {
  for (Peer& p : peers_) p.changed_s = now_s;
}

int PeerMonitor::failed(double now_s, std::string* why, bool (*pid_alive)(int64_t)) const {
  // A peer already ending because of a failed rank: name that rank, as it did.
  for (size_t r = 0; r < peers_.size(); ++r) {
    const Peer& p = peers_[r];
    if (static_cast<int>(r) == rank_ || !p.last || p.last->blame < 0 ||
        p.last->blame >= static_cast<int64_t>(peers_.size()) || p.last->blame == rank_)
      continue;
    if (why) *why = p.last->state + " (found by rank " + std::to_string(r) + ")";
    return static_cast<int>(p.last->blame);
  }
  for (size_t r = 0; r < peers_.size(); ++r) {
    const Peer& p = peers_[r];
    if (static_cast<int>(r) == rank_ || !p.last || p.last->finished) continue;
    const Heartbeat& h = *p.last;
    const Fate f = fate(p, now_s, pid_alive);
    if (f == Fate::kRunning) continue;
    if (why) {
      const std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(h.pid) + " on " + h.host + ")";
      *why = f == Fate::kDied ? who + " died (its last heartbeat: " + doing(h.step, h.state) + ")"
                              : who + " stopped responding: no heartbeat for " + fmt_seconds(now_s - p.changed_s) +
                                    " s (stopped, frozen or cut off; its last heartbeat: " + doing(h.step, h.state) + ")";
    }
    return static_cast<int>(r);
  }
  return -1;
}

bool PeerMonitor::all_told(int failed_rank, double now_s, bool (*pid_alive)(int64_t)) const {
  for (size_t r = 0; r < peers_.size(); ++r) {
    const Peer& p = peers_[r];
    if (static_cast<int>(r) == rank_ || static_cast<int>(r) == failed_rank || !p.last) continue;
    if (p.last->blame >= 0 || p.last->finished || fate(p, now_s, pid_alive) != Fate::kRunning) continue;
    return false;
  }
  return true;
}

PeerMonitor::Fate PeerMonitor::fate(const Peer& p, double now_s, bool (*pid_alive)(int64_t)) const {
  if (pid_alive != nullptr && p.last->host == host_ && !pid_alive(p.last->pid)) return Fate::kDied;
  return now_s - p.changed_s > stale_s_ ? Fate::kSilent : Fate::kRunning;
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  if (!std::getline(stat, content)) return true;  // no /proc: kill() said it exists
  const size_t paren = content.rfind(')');  // "pid (comm) S ..."; comm may hold spaces
  if (paren == std::string::npos || paren + 2 >= content.size()) return true;
  const char state = content[paren + 2];
  return state != 'Z' && state != 'X';
}

std::string host_name() {
  char h[256] = {0};
  if (::gethostname(h, sizeof h - 1) != 0 || h[0] == 0) return "?";
  for (char* c = h; *c; ++c)
    if (*c == ' ') *c = '_';
  return h;
}

// ---- the watchdog

Watchdog::Watchdog(Communicator& world, const std::string& dir, double period_s, double stale_s)
    : rank_(world.rank()), size_(world.size()), dir_(dir), host_(host_name()), period_s_(period_s), stale_s_(stale_s) {
  MF_CHECK(period_s > 0 && stale_s > period_s, "watchdog: the heartbeat period (", period_s,
           " s) must be positive and shorter than the silence that means failure (", stale_s, " s)");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string path = peer_file(dir_, rank_);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  MF_CHECK(fd_ >= 0, "watchdog: cannot write the heartbeat file ", path, ": ", std::strerror(errno));
  beat(false);
  // Every rank's first heartbeat is on disk before anyone reads: an old run's files (the run
  // lock keeps runs apart) are overwritten by then.
  world.barrier()->wait();
  MF_CHECK(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0, "watchdog: pipe: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
  g_signal_fd.store(wake_[1]);
}

Watchdog::~Watchdog() {
  g_signal_fd.store(-1);
  // A rank that ends by an exception has failed: leave its heartbeat as it was, so peers that
  // still wait for it see it die rather than finish.
  const bool finished = std::uncaught_exceptions() == 0;
  stop_.store(true);
  const char byte = 0;
  ssize_t n = ::write(wake_[1], &byte, 1);
  (void)n;
  if (thread_.joinable()) thread_.join();
  if (finished) beat(true);
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(fd_);
}

bool Watchdog::forward_signal(int sig, bool stop_request) {
  const int fd = g_signal_fd.load();
  if (fd < 0) return false;
  const char byte = static_cast<char>((sig & kSignalBits) | (stop_request ? kStopRequestBit : 0));
  return ::write(fd, &byte, 1) == 1;
}

void Watchdog::beat(bool finished, int64_t blame, const std::string& why) {
  Heartbeat h;
  h.pid = ::getpid();
  h.beat = ++beats_;
  h.step = current_step();
  h.finished = finished;
  h.host = host_;
  h.blame = blame;
  h.state = blame >= 0 ? why : current_wait();
  const std::string line = format_heartbeat(h);
  ssize_t n = ::pwrite(fd_, line.data(), line.size(), 0);  // one write: readers see it whole or torn (then skip)
  (void)n;
}

void Watchdog::announce(const std::string& line, int64_t blame) {
  if (blame >= 0) beat(false, blame, line);  // the peers name the same rank
  const std::string me = "[rank " + std::to_string(rank_) + "/" + std::to_string(size_) + "] ";
  const std::string out = "meshflow: error: " + me + line + "; this rank was " +
                          doing(current_step(), current_wait()) + "\n";
  if (ftrylockfile(stdout) == 0) {  // the log so far, unless the main thread is inside a printf
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());
  (void)n;
}

void Watchdog::look(PeerMonitor& monitor, double now_s) const {
  for (int r = 0; r < size_; ++r)
    if (r != rank_) monitor.observe(r, read_heartbeat(peer_file(dir_, r)), now_s);
}

void Watchdog::linger(PeerMonitor& monitor, int failed_rank) {
  const double until = now_seconds() + 3 * period_s_;
  for (double now = now_seconds(); now < until; now = now_seconds()) {
    look(monitor, now);
    if (monitor.all_told(failed_rank, now, &process_alive)) return;
    pollfd p{wake_[0], POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) return;  // the launcher's signal or the main thread ending: go now
  }
}

void Watchdog::run() {
  PeerMonitor monitor(rank_, size_, host_, stale_s_);
  double last = now_seconds();
  look(monitor, last);
  while (!stop_.load()) {
    pollfd p{wake_[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::ceil(period_s_ * 1000)));
    if (stop_.load()) break;
    const double now = now_seconds();
    if (ready > 0) {
      char byte = 0;
      if (::read(wake_[0], &byte, 1) == 1 && byte != 0) {
        const int sig = byte & kSignalBits;
        const bool stop_request = (byte & kStopRequestBit) != 0;
        // The launcher is ending the job: name the peer that died, if it ran on this host. A stop
        // request with no failed peer is the trainer's to handle.
        look(monitor, now);
        std::string why;
        const std::string what = "terminated by the launcher (signal " + std::to_string(sig) + ")";
        const bool peer_failed = monitor.failed(now, &why, &process_alive) >= 0;
        if (stop_request && !peer_failed) continue;
        if (peer_failed)
          announce(what + ": " + why);
        else
          announce(what + ": another rank of the job failed or died (see its message above)");
        ::_exit(128 + sig);
      }
      continue;
    }
    // This thread itself was held up (the process stopped, the machine swapping): the peers'
    // silences measured that, not them.
    if (now - last > std::max(3 * period_s_, stale_s_ / 2)) monitor.restart_clocks(now);
    last = now;
    beat(false);
    look(monitor, now);
    std::string why;
    const int bad = monitor.failed(now, &why, &process_alive);
    if (bad >= 0) {
      announce(why, bad);
      linger(monitor, bad);
      ::_exit(1);
    }
  }
}

}  // namespace mf::comm
