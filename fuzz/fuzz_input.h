// Helpers shared by the fuzz targets: an input cut into the parts a parser reads (files, text),
// and a private scratch folder for parsers that read from a path.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace mf::fuzz {

// The input cut at its first `n - 1` NUL bytes into `n` parts (missing parts are empty).
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t n) {
  std::vector<std::string> parts(n);
  std::string_view s(reinterpret_cast<const char*>(data), size);
  for (size_t k = 0; k + 1 < n; ++k) {
    const size_t nul = s.find('\0');
    if (nul == std::string_view::npos) {
      parts[k] = std::string(s);
      return parts;
    }
    parts[k] = std::string(s.substr(0, nul));
    s.remove_prefix(nul + 1);
  }
  parts[n - 1] = std::string(s);
  return parts;
}

// A folder of this process (in /dev/shm when there is one: no disk writes per run), removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    std::string tmpl = std::string(base) + "/meshflow-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
  }
  ~ScratchDir() {
    for (const std::string& f : written_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  // Writes `bytes` to <dir>/<name> and returns the path.
  std::string write(const std::string& name, std::string_view bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bool seen = false;
    for (const std::string& f : written_) seen = seen || f == path;
    if (!seen) written_.push_back(path);
    return path;
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::string> written_;
};

}  // namespace mf::fuzz
