// A read-only memory map of a whole file (RAII): unmapped and closed on destruction. An empty
// file maps to an empty view.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mf {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws mf::Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return static_cast<const unsigned char*>(addr_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mf
