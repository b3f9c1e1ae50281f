// Tokenizers: text <-> token ids. `Tokenizer` is the interface the data pipeline and the
// generation code use; `ByteTokenizer` (ids 0..255 = bytes, 256 = end of document) needs no
// files; `Gpt2BpeTokenizer` (gpt2_bpe.h) is GPT-2's byte-level BPE. All implementations are
// safe to call from several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mf {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any byte string encodes (invalid UTF-8 included); decode(encode(s)) == s.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws mf::Error for an id outside [0, vocab_size()). The end-of-document id decodes to
  // the text "<|endoftext|>".
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod_id() const = 0;
  virtual std::string name() const = 0;  // "byte", "gpt2-bpe"
};

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return 257; }
  int32_t eod_id() const override { return kEod; }
  std::string name() const override { return "byte"; }
};

// "byte" -> ByteTokenizer; "gpt2" / "gpt2-bpe" -> Gpt2BpeTokenizer::from_directory(vocab_dir).
// Throws naming the kind when it is unknown.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_dir = "");

}  // namespace mf
