// GPT-2's byte-level BPE tokenizer (Radford et al. 2019). Text is split by the GPT-2
// pre-tokeniser (gpt2_pretokenize.h); each piece's bytes become single-byte tokens, which are
// merged pairwise — always the pair with the lowest merge rank, all its non-overlapping
// occurrences left to right — until no ranked pair remains. Results are cached per piece.
//
// Vocabulary files: Hugging Face's `vocab.json` + `merges.txt` or OpenAI's `encoder.json` +
// `vocab.bpe` — the same data (token -> id as JSON, then one merge "a b" per line after a
// `#version` line). Tokens are written in GPT-2's bytes->unicode alphabet. `<|endoftext|>`
// (50256 in GPT-2) is the end-of-document id; encode() treats that text like any other text.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/data/byte_level_bpe.h"
#include "meshflow/data/tokenizer.h"

namespace mf {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Throws mf::Error naming the file when one is missing, unreadable or corrupt.
  Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_path);
  // `dir` holding vocab.json + merges.txt (preferred) or encoder.json + vocab.bpe.
  static Gpt2BpeTokenizer from_directory(const std::string& dir);

  Gpt2BpeTokenizer(Gpt2BpeTokenizer&&) noexcept;
  Gpt2BpeTokenizer& operator=(Gpt2BpeTokenizer&&) noexcept;
  ~Gpt2BpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_bytes_.size()); }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "gpt2-bpe"; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;

  int64_t num_merges() const { return merges_.num_merges(); }
  // The token's bytes (not its bytes->unicode spelling); throws for an id out of range.
  const std::string& token_bytes(int32_t id) const;

  // GPT-2's reversible map from the 256 byte values to printable code points (UTF-8 encoded).
  static const std::vector<std::string>& byte_to_unicode() { return bpe::byte_to_unicode(); }

 private:
  std::vector<std::string> id_to_bytes_;
  int32_t byte_id_[256] = {};
  bpe::MergeTable merges_;
  int32_t eod_id_ = -1;
  std::unique_ptr<bpe::PieceCache> cache_;  // a pointer: the tokenizer stays movable
};

}  // namespace mf
