// Byte-level BPE: the bytes->unicode alphabet, merges, the piece cache.
#include "meshflow/data/byte_level_bpe.h"

#include <limits>

#include "meshflow/data/unicode.h"

namespace mf::bpe {
namespace {

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {  // the alphabet stays below U+0800
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

const std::unordered_map<char32_t, char>& unicode_to_byte() {
  static const std::unordered_map<char32_t, char> dec = [] {
    std::unordered_map<char32_t, char> d;
    const auto& enc = byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
      size_t len;
      d[unicode::decode_utf8(enc[b], 0, len)] = static_cast<char>(b);
    }
    return d;
  }();
  return dec;
}

}  // namespace

const std::vector<std::string>& byte_to_unicode() {
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

bool unicode_to_bytes(std::string_view token, std::string& bytes) {
  const auto& decoder = unicode_to_byte();
  bytes.clear();
  for (size_t i = 0; i < token.size();) {
    size_t len;
    auto it = decoder.find(unicode::decode_utf8(token, i, len));
    if (it == decoder.end()) return false;
    bytes.push_back(it->second);
    i += len;
  }
  return true;
}

void MergeTable::add(int32_t left, int32_t right, int32_t merged) {
  uint64_t key = (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
  merges_.emplace(key, Merge{static_cast<int32_t>(num_merges_), merged});
  ++num_merges_;
}

void MergeTable::apply(std::vector<int32_t>& word) const {
  while (word.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), best_id = -1, a = 0, b = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      uint64_t key = (static_cast<uint64_t>(word[i]) << 32) | static_cast<uint32_t>(word[i + 1]);
      auto it = merges_.find(key);
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_id = it->second.id;
        a = word[i];
        b = word[i + 1];
      }
    }
    if (best_id < 0) break;
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

bool PieceCache::append(std::string_view piece, std::vector<int32_t>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(piece);
  if (it == map_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void PieceCache::store(std::string_view piece, const std::vector<int32_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.size() >= kMaxEntries) map_.clear();
  map_.emplace(std::string(piece), ids);
}

}  // namespace mf::bpe
