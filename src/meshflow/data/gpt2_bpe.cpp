// GPT-2 byte-level BPE: vocabulary loading, merges, encode with a per-piece cache, decode.
#include "meshflow/data/gpt2_bpe.h"

#include <filesystem>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_pretokenize.h"
#include "meshflow/data/unicode.h"

namespace mf {
namespace {

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Maps a token spelled in the bytes->unicode alphabet back to its bytes; false if a character
// is outside that alphabet.
bool unicode_to_bytes(std::string_view token, const std::unordered_map<char32_t, char>& decoder, std::string& out) {
  out.clear();
  for (size_t i = 0; i < token.size();) {
    size_t len;
    char32_t cp = unicode::decode_utf8(token, i, len);
    auto it = decoder.find(cp);
    if (it == decoder.end()) return false;
    out.push_back(it->second);
    i += len;
  }
  return true;
}

const std::unordered_map<char32_t, char>& unicode_decoder() {
  static const std::unordered_map<char32_t, char> dec = [] {
    std::unordered_map<char32_t, char> d;
    const auto& enc = Gpt2BpeTokenizer::byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
      size_t len;
      d[unicode::decode_utf8(enc[b], 0, len)] = static_cast<char>(b);
    }
    return d;
  }();
  return dec;
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

constexpr size_t kMaxCacheEntries = size_t{1} << 20;

}  // namespace

struct Gpt2BpeTokenizer::Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, SvHash, std::equal_to<>> map;
};

const std::vector<std::string>& Gpt2BpeTokenizer::byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = utf8(printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++));
    }
    return t;
  }();
  return table;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_path, const std::string& merges_path)
    : cache_(std::make_unique<Cache>()) {
  const auto& decoder = unicode_decoder();
  // Vocabulary: {"token": id, ...} with ids 0..V-1, each once.
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_file(vocab_path));
  } catch (const nlohmann::json::exception& e) {
    MF_THROW("GPT-2 vocabulary ", vocab_path, ": not valid JSON (", e.what(), ")");
  }
  MF_CHECK(vocab.is_object() && !vocab.empty(), "GPT-2 vocabulary ", vocab_path,
           ": expected a non-empty JSON object of token -> id");
  id_to_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  std::unordered_map<std::string, int32_t, SvHash, std::equal_to<>> bytes_to_id;
  bytes_to_id.reserve(vocab.size());
  std::string bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    MF_CHECK(it->is_number_integer(), "GPT-2 vocabulary ", vocab_path, ": id of token '", it.key(),
             "' is not an integer");
    int64_t id = it->get<int64_t>();
    MF_CHECK(id >= 0 && id < static_cast<int64_t>(vocab.size()) && !seen[id], "GPT-2 vocabulary ", vocab_path,
             ": id ", id, " of token '", it.key(), "' is out of range or repeated (", vocab.size(), " tokens)");
    MF_CHECK(unicode_to_bytes(it.key(), decoder, bytes), "GPT-2 vocabulary ", vocab_path, ": token '", it.key(),
             "' has characters outside GPT-2's byte alphabet");
    seen[id] = true;
    id_to_bytes_[id] = bytes;
    bytes_to_id.emplace(bytes, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    MF_CHECK(it != bytes_to_id.end(), "GPT-2 vocabulary ", vocab_path, ": no token for byte ", b);
    byte_id_[b] = it->second;
  }
  auto eod = bytes_to_id.find(std::string_view("<|endoftext|>"));
  MF_CHECK(eod != bytes_to_id.end(), "GPT-2 vocabulary ", vocab_path, ": no <|endoftext|> token");
  eod_id_ = eod->second;

  // Merges: "a b" per line, rank = order; an optional leading "#version" line.
  std::istringstream in(read_file(merges_path));
  std::string line, left, right;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    MF_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
             "GPT-2 merges ", merges_path, ":", lineno, ": expected two tokens separated by one space, got '",
             line, "'");
    bool ok = unicode_to_bytes(std::string_view(line).substr(0, sp), decoder, left) &&
              unicode_to_bytes(std::string_view(line).substr(sp + 1), decoder, right);
    auto a = bytes_to_id.find(left), b = bytes_to_id.find(right), ab = bytes_to_id.find(left + right);
    MF_CHECK(ok && a != bytes_to_id.end() && b != bytes_to_id.end() && ab != bytes_to_id.end(), "GPT-2 merges ",
             merges_path, ":", lineno, ": merge '", line, "' uses or makes a token missing from ", vocab_path);
    uint64_t key = (static_cast<uint64_t>(a->second) << 32) | static_cast<uint32_t>(b->second);
    merges_.emplace(key, Merge{static_cast<int32_t>(num_merges_), ab->second});  // first rank wins
    ++num_merges_;
  }
  MF_CHECK(num_merges_ > 0, "GPT-2 merges ", merges_path, ": no merges");
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  if (fs::exists(d / "vocab.json") || fs::exists(d / "merges.txt"))
    return Gpt2BpeTokenizer((d / "vocab.json").string(), (d / "merges.txt").string());
  if (fs::exists(d / "encoder.json") || fs::exists(d / "vocab.bpe"))
    return Gpt2BpeTokenizer((d / "encoder.json").string(), (d / "vocab.bpe").string());
  MF_THROW("GPT-2 tokenizer: ", dir, " holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer& Gpt2BpeTokenizer::operator=(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

void Gpt2BpeTokenizer::bpe(std::string_view piece, std::vector<int32_t>& word) const {
  word.resize(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  while (word.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    uint64_t best_key = 0;
    int32_t best_id = -1;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      uint64_t key = (static_cast<uint64_t>(word[i]) << 32) | static_cast<uint32_t>(word[i + 1]);
      auto it = merges_.find(key);
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_key = key;
        best_id = it->second.id;
      }
    }
    if (best_id < 0) break;
    int32_t a = static_cast<int32_t>(best_key >> 32), b = static_cast<int32_t>(best_key & 0xFFFFFFFFu);
    size_t w = 0;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
        word[w++] = best_id;
        i += 2;
      } else {
        word[w++] = word[i++];
      }
    }
    word.resize(w);
  }
}

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  std::vector<std::string_view> pieces;
  gpt2_pretokenize(text, pieces);
  std::vector<int32_t> word;
  for (std::string_view p : pieces) {
    {
      std::lock_guard<std::mutex> lock(cache_->mu);
      auto it = cache_->map.find(p);
      if (it != cache_->map.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    bpe(p, word);
    ids.insert(ids.end(), word.begin(), word.end());
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->map.size() >= kMaxCacheEntries) cache_->map.clear();
    cache_->map.emplace(std::string(p), word);
  }
  return ids;
}

const std::string& Gpt2BpeTokenizer::token_bytes(int32_t id) const {
  MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "Gpt2BpeTokenizer: id ", id,
           " outside [0, ", id_to_bytes_.size(), ")");
  return id_to_bytes_[id];
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace mf
