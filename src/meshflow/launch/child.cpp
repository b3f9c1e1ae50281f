// fork + execv of a job's launcher, its stderr teed through a pipe, stop signals forwarded.
#include "meshflow/launch/child.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "meshflow/core/error.h"

namespace mf::launch {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_count = 0;
struct sigaction g_old_int, g_old_term, g_old_usr1;

extern "C" void note_signal(int sig) {
  g_signal = sig;
  g_count = g_count + 1;
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our stderr is gone: keep running the job regardless
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Splits the bytes read into lines, keeping the last `keep` of them.
struct LineKeeper {
  size_t keep;
  std::string partial;
  std::deque<std::string> lines;
  void add(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (p[i] == '\n') {
        push();
      } else if (partial.size() < 4096) {
        partial += p[i];
      }
    }
  }
  void push() {
    lines.push_back(std::move(partial));
    partial.clear();
    if (lines.size() > keep) lines.pop_front();
  }
};
}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  g_count = 0;
  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGUSR1, &sa, &g_old_usr1);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
}

int StopSignals::received() { return g_signal; }
int StopSignals::count() { return g_count; }

std::string find_executable(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return executable(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : std::string(".");
    if (executable(dir + "/" + name)) return dir + "/" + name;
    start = end + 1;
  }
  return "";
}

ChildResult run_child(const std::vector<std::string>& argv, size_t keep_lines) {
  MF_CHECK(!argv.empty(), "launch: an empty command");
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int fds[2];
  MF_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "launch: pipe: ", std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    MF_THROW("launch: fork: ", std::strerror(e));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until execv.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the supervisor died already
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGINT, &dfl, nullptr);
    ::sigaction(SIGTERM, &dfl, nullptr);
    ::sigaction(SIGUSR1, &dfl, nullptr);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execv(cargv[0], cargv.data());
    const char msg[] = "meshflow: error: launch: cannot run the launcher (execv failed)\n";
    ssize_t w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that a signal forwarded at once finds the group
  ::close(fds[1]);
  ChildResult r;
  LineKeeper keeper{keep_lines, {}, {}};
  int handled = 0;  // stop signals forwarded
  bool exited = false, eof = false;
  int wait_status = 0;
  char buf[8192];
  auto drain = [&](int timeout_ms) {
    struct pollfd p {fds[0], POLLIN, 0};
    const int k = ::poll(&p, 1, timeout_ms);
    if (k <= 0) return false;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      if (n == 0 || errno != EINTR) eof = true;
      return false;
    }
    write_all(STDERR_FILENO, buf, static_cast<size_t>(n));
    keeper.add(buf, static_cast<size_t>(n));
    return true;
  };
  while (!exited) {
    if (StopSignals::count() > handled) {
      handled = StopSignals::count();
      if (handled == 1) {
        // As SIGUSR1, which Open MPI's mpirun and Slurm's srun pass on to every rank and leave
        // the job running (mpirun kills its ranks a second after passing on SIGTERM or SIGINT):
        // the ranks stop after the same step with a checkpoint (train/stop_signal.h).
        r.forwarded_signal = StopSignals::received();
        ::kill(pid, SIGUSR1);
      } else {
        ::kill(-pid, SIGKILL);
      }
    }
    if (!eof) drain(100);
    else ::usleep(100 * 1000);
    const pid_t w = ::waitpid(pid, &wait_status, WNOHANG);
    if (w == pid) exited = true;
  }
  // What it wrote last (its ranks may be gone without closing their copies: a bounded wait).
  for (int i = 0; i < 1000 && !eof; ++i)
    if (!drain(50) && !eof) break;
  ::close(fds[0]);
  if (!keeper.partial.empty()) keeper.push();
  r.status = exit_status_from_wait(wait_status);
  r.stderr_lines.assign(keeper.lines.begin(), keeper.lines.end());
  return r;
}

}  // namespace mf::launch
