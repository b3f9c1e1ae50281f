// Crash-safe file output: write to a temporary beside the target, fsync, rename over the
// target, fsync the directory. A crash leaves either the old file or the new one, never half.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mf {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // opens "<path>.tmp.<pid>"; throws naming the path
  ~AtomicFile();                          // not committed: the temporary is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t nbytes);  // throws on a short or failed write
  void write(std::string_view s) { write(s.data(), s.size()); }
  size_t bytes_written() const { return written_; }
  void commit();  // fsync, close, rename into place, fsync the directory

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  size_t written_ = 0;
};

// Writes `content` to `path` atomically.
void write_file_atomic(const std::string& path, std::string_view content);
// Whole file as bytes; throws naming the path when it cannot be read.
std::string read_file(const std::string& path);
// Creates folder `path` and its parents (nothing when it exists); throws one line naming `what`
// (the key or flag that gave the path) and the reason: an empty path, a file in the way, no
// permission.
void make_folder(const std::string& path, const std::string& what);

}  // namespace mf
