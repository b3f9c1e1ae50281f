// Tokenizer encode speed: milliseconds to encode one unbroken word of 1 MB and of 2 MB
// (pseudo-random lower-case letters: the pre-tokeniser leaves it whole, so its BPE merges run on
// one word of a million symbols), and ordinary text (4 MB of English-like words, spaces,
// punctuation and newlines), each as one encode() call, with GPT-2's BPE (data/gpt2), Llama 3's
// tokenizer.json and Llama 2's tokenizer.json (byte fallback, no pre-tokeniser: a whole
// document is one word) where scripts/fetch-tokenizers.sh put them. A tokenizer that cannot be
// loaded is reported and skipped. Speed is measured here, never in tests.
//
// Usage (from the repository root): meshflow_tokenizer_bench [word sizes in MB (1,2)] [tokenizers (gpt2,llama3,llama2)]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "meshflow/core/error.h"
#include "meshflow/data/tokenizer.h"

namespace {

namespace fs = std::filesystem;

uint64_t next_random(uint64_t& state) {  // xorshift64
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

std::string unbroken_word(size_t bytes, uint64_t seed) {
  std::string s(bytes, 'a');
  for (char& c : s) c = static_cast<char>('a' + next_random(seed) % 26);
  return s;
}

// English-like text: common words with capitals, commas, full stops and paragraph breaks.
std::string ordinary_text(size_t bytes) {
  static const char* kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
      "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
      "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when",
      "will", "would", "who", "so", "no", "training", "model", "language", "tokenizer", "parallel", "tensor",
      "pipeline", "gradient", "memory", "throughput", "transformer", "attention", "sequence", "between",
      "because", "however", "government", "university", "development", "information", "international",
      "1984", "2024", "42", "3.14", "Llama", "Qwen", "GPT", "Hugging", "Face"};
  const size_t n = sizeof kWords / sizeof kWords[0];
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  std::string s;
  s.reserve(bytes + 64);
  bool sentence_start = true;
  while (s.size() < bytes) {
    std::string w = kWords[next_random(seed) % n];
    if (sentence_start && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
    s += w;
    const uint64_t r = next_random(seed) % 100;
    sentence_start = r < 8;
    s += r < 2 ? ".\n\n" : r < 8 ? ". " : r < 14 ? ", " : " ";
  }
  return s;
}

struct Named {
  std::string name;
  std::unique_ptr<mf::Tokenizer> tok;
};

std::vector<Named> load(const std::string& wanted) {
  const fs::path root(".");  // run from the repository root
  const fs::path gpt2 = fs::exists(root / "data" / "gpt2") ? root / "data" / "gpt2" : root / ".." / "shared" / "data" / "gpt2";
  struct Spec {
    const char *name, *kind;
    fs::path path;
  };
  const Spec specs[] = {{"gpt2", "gpt2", gpt2},
                        {"llama3", "hf_bpe", root / "data" / "tokenizers" / "llama3" / "tokenizer.json"},
                        {"llama2", "hf_bpe", root / "data" / "tokenizers" / "llama2" / "tokenizer.json"}};
  std::vector<Named> out;
  for (const Spec& s : specs) {
    if (("," + wanted + ",").find(std::string(",") + s.name + ",") == std::string::npos) continue;
    try {
      out.push_back({s.name, mf::make_tokenizer(s.kind, s.path.string())});
    } catch (const mf::Error& e) {
      std::printf("%-8s not loaded: %s\n", s.name, e.what());
    }
  }
  return out;
}

double encode_ms(const mf::Tokenizer& tok, const std::string& text, size_t& ids) {
  const auto t0 = std::chrono::steady_clock::now();
  ids = tok.encode(text).size();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> word_mb;
  std::stringstream sizes(argc > 1 ? argv[1] : "1,2");
  for (std::string item; std::getline(sizes, item, ',');) word_mb.push_back(std::stoul(item));
  const std::vector<Named> toks = load(argc > 2 ? argv[2] : "gpt2,llama3,llama2");
  const size_t kOrdinaryBytes = size_t{4} << 20;
  const std::string text = ordinary_text(kOrdinaryBytes);
  std::printf("%-8s %-26s %10s %12s %10s\n", "tokenizer", "input", "ids", "ms", "MB/s");
  for (const Named& t : toks) {
    size_t ids = 0;
    for (size_t mb : word_mb) {
      const std::string word = unbroken_word(mb << 20, 0x1234567ull + mb);
      const double ms = encode_ms(*t.tok, word, ids);
      std::printf("%-8s %-26s %10zu %12.1f %10.2f\n", t.name.c_str(), (std::to_string(mb) + " MB unbroken word").c_str(),
                  ids, ms, static_cast<double>(mb) / (ms / 1000.0));
      std::fflush(stdout);
    }
    const double ms = encode_ms(*t.tok, text, ids);
    std::printf("%-8s %-26s %10zu %12.1f %10.2f\n", t.name.c_str(), "4 MB ordinary text", ids, ms,
                4.0 / (ms / 1000.0));
    std::fflush(stdout);
  }
  return 0;
}
