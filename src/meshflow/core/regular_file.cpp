#include "meshflow/core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "meshflow/core/error.h"

namespace mf {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void throw_errno(const std::string& path, const std::string& what, int err) {
  if (err == ENOENT) MF_THROW(what, " '", path, "': no such file");
  MF_THROW(what, " '", path, "': cannot open (", std::strerror(err), ")");
}

void check_stat(const struct stat& st, const std::string& path, const std::string& what, uint64_t max_bytes) {
  MF_CHECK(S_ISREG(st.st_mode), what, " '", path, "' is ", kind_of(st.st_mode), ", not a regular file; give the file itself");
  MF_CHECK(static_cast<uint64_t>(st.st_size) <= max_bytes, what, " '", path, "' is ", st.st_size,
           " bytes, more than the ", max_bytes, " this file may have; is it the right file?");
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void check_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_errno(path, what, errno);
  check_stat(st, path, what, max_bytes);
}

std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO returns at once (fstat then refuses it); reads of a regular file
  // never block.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw_errno(path, what, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno(path, what, errno);
  check_stat(st, path, what, max_bytes);
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  for (;;) {
    if (got == out.size()) out.resize(out.size() + 65536);  // the file grew since fstat: read on
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    MF_CHECK(n >= 0, what, " '", path, "': read failed (", std::strerror(errno), ")");
    if (n == 0) break;
    got += static_cast<size_t>(n);
    MF_CHECK(got <= max_bytes, what, " '", path, "' grew past ", max_bytes, " bytes while being read");
  }
  out.resize(got);
  return out;
}

}  // namespace mf
