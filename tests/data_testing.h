// Helpers for the data tests: a temporary directory removed with its contents, the GPT-2
// vocabulary folder, the fetched tokenizer files, and whole-file reads.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "meshflow/core/error.h"

namespace mft {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "meshflow_test_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw mf::Error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The committed copy under data/gpt2, else ../shared/data/gpt2 next to the repository.
inline std::string gpt2_vocab_dir() {
  std::filesystem::path root(MESHFLOW_SOURCE_DIR);
  for (auto p : {root / "data" / "gpt2", root / ".." / "shared" / "data" / "gpt2"})
    if (std::filesystem::exists(p / "encoder.json")) return p.string();
  throw mf::Error("GPT-2 vocabulary not found under " + root.string() + "/data/gpt2 or ../shared/data/gpt2");
}

// A real model's tokenizer file under data/tokenizers (e.g. "llama3/tokenizer.json"), which
// scripts/fetch-tokenizers.sh downloads, or the tiny T5 tokenizer ("t5-tiny/spiece.model") that
// scripts/make_t5_tokenizer.sh trains (scripts/test.sh runs both); throws, failing the test, when
// it is missing.
inline std::string tokenizer_data_file(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(MESHFLOW_SOURCE_DIR) / "data" / "tokenizers" / name;
  if (!std::filesystem::exists(p))
    throw mf::Error(p.string() + " is missing: run `bash " +
                    (name.rfind("t5-tiny", 0) == 0 ? "scripts/make_t5_tokenizer.sh" : "scripts/fetch-tokenizers.sh") +
                    "` (scripts/test.sh does)");
  return p.string();
}

inline std::string fixture_path(const std::string& name) {
  return std::string(MESHFLOW_SOURCE_DIR) + "/tests/fixtures/" + name;
}

inline void write_text(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
  if (!f) throw mf::Error("cannot write " + path);
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace mft
