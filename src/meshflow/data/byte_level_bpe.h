// The parts of byte-level BPE that GPT-2's tokenizer (gpt2_bpe.h) and Hugging Face's
// tokenizer.json (hf_bpe.h) share: GPT-2's reversible bytes->unicode alphabet in which both
// write their tokens, the merge table and its application to one pre-tokenized piece, and a
// thread-safe cache of the ids each piece encoded to.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mf::bpe {

// The 256 byte values' printable code points (UTF-8 encoded): bytes '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF stand for themselves, the others for U+0100 onwards in byte order.
const std::vector<std::string>& byte_to_unicode();

// A token spelled in that alphabet back to its bytes; false if a character is outside it.
bool unicode_to_bytes(std::string_view token, std::string& bytes);

class MergeTable {
 public:
  // The next merge in rank order: the pair (left, right) becomes `merged`. A pair seen before
  // keeps its first rank (as the reference implementations do).
  void add(int32_t left, int32_t right, int32_t merged);
  int64_t num_merges() const { return num_merges_; }
  // Merges `word` (token ids) in place: repeatedly the adjacent pair of lowest rank, its
  // leftmost occurrence, until no ranked pair remains (as Hugging Face's tokenizers and tiktoken
  // do; for tables where every merge's parts come from earlier merges, the same as merging all
  // occurrences of that pair at once, GPT-2's way). O(n log n) in the word's length n. Throws
  // for a word of 2^32 - 1 symbols or more.
  void apply(std::vector<int32_t>& word) const;

 private:
  struct Merge {
    int32_t rank, id;
  };
  static constexpr uint32_t kNoSymbol = 0xFFFFFFFFu;
  const Merge* find(int32_t left, int32_t right) const;  // nullptr when the pair has no merge
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> rank, merged id
  int64_t num_merges_ = 0;
};

// Piece text -> ids, shared by the threads that encode with one tokenizer. Pieces longer than
// kMaxPieceBytes are not kept (a long unbroken word, or a whole text where no pre-tokeniser
// splits it, would rarely repeat), and the cache is cleared when it reaches kMaxEntries, so that
// memory stays bounded on large corpora.
class PieceCache {
 public:
  static constexpr size_t kMaxEntries = size_t{1} << 20;
  static constexpr size_t kMaxPieceBytes = 256;
  // Appends the cached ids of `piece` to `out`; false when the piece is not cached.
  bool append(std::string_view piece, std::vector<int32_t>& out) const;
  // Keeps `ids` for `piece` unless the piece is longer than kMaxPieceBytes.
  void store(std::string_view piece, const std::vector<int32_t>& ids);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map_;
};

}  // namespace mf::bpe
