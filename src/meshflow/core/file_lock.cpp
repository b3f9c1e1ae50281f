#include "meshflow/core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "meshflow/core/error.h"

namespace mf {

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  MF_CHECK(fd_ >= 0, "cannot open the lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    locked_ = true;
    const std::string me = "pid " + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
      // the id is for messages only; the lock holds without it
    }
    return;
  }
  char buf[64] = {};
  const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
  holder_.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!holder_.empty() && (holder_.back() == '\n' || holder_.back() == ' ')) holder_.pop_back();
  ::close(fd_);
  fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace mf
