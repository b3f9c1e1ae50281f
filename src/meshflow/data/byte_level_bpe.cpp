// Byte-level BPE: the bytes->unicode alphabet, merges, the piece cache.
#include "meshflow/data/byte_level_bpe.h"

#include <algorithm>
#include <functional>

#include "meshflow/core/error.h"

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

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  auto it = merges_.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
  return it == merges_.end() ? nullptr : &it->second;
}

// The symbols of a word as a doubly linked list over their first positions (a merged symbol
// keeps its left part's position, so list order is position order), and a min-heap of the
// ranked adjacent pairs keyed (rank, position). A pair's entry records the version of its left
// symbol when pushed; a merge bumps the versions of the symbols whose right neighbour changed
// (the merged one and the one before it) and of the one it removed, which makes their older
// entries stale. Each merge pushes at most two entries: O(n log n) for a word of n symbols.
void MergeTable::apply(std::vector<int32_t>& word) const {
  const size_t n = word.size();
  if (n < 2) return;
  MF_CHECK(n < kNoSymbol, "BPE: a piece of ", n, " symbols is longer than the ", kNoSymbol - 1,
           " a word may have; split the text");
  struct Candidate {
    int32_t rank;
    uint32_t pos, version;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<uint32_t> prev(n), next(n), version(n, 0);
  std::vector<Candidate> heap;
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNoSymbol : static_cast<uint32_t>(i - 1);
    next[i] = i + 1 == n ? kNoSymbol : static_cast<uint32_t>(i + 1);
    if (i + 1 < n)
      if (const Merge* m = find(word[i], word[i + 1])) heap.push_back({m->rank, static_cast<uint32_t>(i), 0});
  }
  const std::greater<Candidate> later;
  std::make_heap(heap.begin(), heap.end(), later);
  auto push_pair = [&](uint32_t left) {
    if (left == kNoSymbol || next[left] == kNoSymbol) return;
    if (const Merge* m = find(word[left], word[next[left]])) {
      heap.push_back({m->rank, left, version[left]});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    if (c.version != version[c.pos]) continue;  // the pair changed since it was pushed
    const uint32_t right = next[c.pos];
    word[c.pos] = find(word[c.pos], word[right])->id;
    ++version[right];  // removed: its own pair's entries are stale
    ++version[c.pos];
    next[c.pos] = next[right];
    if (next[right] != kNoSymbol) prev[next[right]] = c.pos;
    if (prev[c.pos] != kNoSymbol) ++version[prev[c.pos]];
    push_pair(prev[c.pos]);
    push_pair(c.pos);
  }
  size_t w = 0;
  for (uint32_t i = 0; i != kNoSymbol; i = next[i]) word[w++] = word[i];
  word.resize(w);
}

bool PieceCache::append(std::string_view piece, std::vector<int32_t>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(piece);
  if (it == map_.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void PieceCache::store(std::string_view piece, const std::vector<int32_t>& ids) {
  if (piece.size() > kMaxPieceBytes) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.size() >= kMaxEntries) map_.clear();
  map_.emplace(std::string(piece), ids);
}

}  // namespace mf::bpe
