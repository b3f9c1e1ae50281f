#include "meshflow/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "meshflow/core/error.h"

namespace mf {

namespace {
std::string errno_str() { return std::strerror(errno); }

void fsync_dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  MF_CHECK(!path_.empty() && path_.back() != '/', "cannot write a file named '", path_, "': give a file name");
  MF_CHECK(!std::filesystem::is_directory(path_), "cannot write ", path_, ": it is a folder; give a file name");
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MF_CHECK(fd_ >= 0, "cannot create ", tmp_, ": ", errno_str());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t nbytes) {
  MF_CHECK(fd_ >= 0, "write to ", path_, " after commit");
  const char* p = static_cast<const char*>(data);
  size_t left = nbytes;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    MF_CHECK(n > 0, "write to ", tmp_, " failed: ", errno_str());
    p += n;
    left -= static_cast<size_t>(n);
  }
  written_ += nbytes;
}

void AtomicFile::commit() {
  MF_CHECK(fd_ >= 0, "commit of ", path_, " twice");
  MF_CHECK(::fsync(fd_) == 0, "fsync of ", tmp_, " failed: ", errno_str());
  int rc = ::close(fd_);
  fd_ = -1;
  MF_CHECK(rc == 0, "close of ", tmp_, " failed: ", errno_str());
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string err = errno_str();
    ::unlink(tmp_.c_str());
    MF_THROW("rename of ", tmp_, " to ", path_, " failed: ", err);
  }
  fsync_dir_of(path_);
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MF_CHECK(in.good(), "cannot open ", path, ": ", errno_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  MF_CHECK(!in.bad(), "error reading ", path);
  return ss.str();
}

void make_folder(const std::string& path, const std::string& what) {
  MF_CHECK(!path.empty(), what, " is empty: give a folder");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  MF_CHECK(!ec && std::filesystem::is_directory(path), what, " '", path, "': cannot create the folder (",
           ec ? ec.message() : "a file is in the way", ")");
}

}  // namespace mf
