// An advisory lock on a file (flock), held for the object's lifetime. The kernel drops it when
// the process ends, however it ends, so a killed run never leaves its folder locked.
#pragma once
#include <string>

namespace mf {

class FileLock {
 public:
  // Creates `path` if needed and takes its lock without waiting. Got it: locked() is true and the
  // file holds this process's id. Held elsewhere: locked() is false and holder() is what the
  // holder wrote ("pid 1234"). Throws naming the path when the file cannot be created.
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool locked() const { return locked_; }
  const std::string& holder() const { return holder_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
  std::string holder_;
};

}  // namespace mf
