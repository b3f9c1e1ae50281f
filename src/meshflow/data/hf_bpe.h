// Byte-level BPE from a Hugging Face `tokenizer.json` (Llama 3, Qwen2, GPT-2 and their kin).
//
// What a file may hold (anything else is refused with one line naming the file and the field):
// - model: type "BPE" with `vocab` (token -> id, tokens in GPT-2's bytes->unicode alphabet, every
//   single byte present) and `merges` ("a b" strings or ["a", "b"] pairs, in rank order);
//   `ignore_merges` (Llama 3: a piece that is itself a token is that token, merges unused); no
//   dropout, byte fallback, subword prefix or word suffix.
// - normalizer: none, or NFC (Qwen2; through ICU).
// - pre_tokenizer: Sequence[Split(Llama 3's or Qwen2's regex, Isolated), ByteLevel(use_regex
//   false)] (llama3_pretokenize.h), or ByteLevel(use_regex true) alone (GPT-2's regex,
//   gpt2_pretokenize.h); add_prefix_space false.
// - added_tokens: matched verbatim in the raw text before normalisation and pre-tokenisation,
//   leftmost and then longest first (as Hugging Face does), special or not; lstrip, rstrip and
//   single_word are not supported.
// encode() adds no begin-of-text token (the post_processor is not applied), so that
// decode(encode(s)) == s for NFC text; `meshflow preprocess` separates documents with the
// end-of-document token only. decode() writes an added token as its text.
//
// End of document: the `eod_token` given, else `<|end_of_text|>` (Llama 3) or `<|endoftext|>`
// (Qwen2, GPT-2) when the file has one, else the `eos_token` of a tokenizer_config.json beside
// the file. The first rule is the token these models' pre-training places between documents;
// tokenizer_config's eos is a chat model's end of turn in instruct releases (`<|eot_id|>`,
// `<|im_end|>`).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meshflow/data/byte_level_bpe.h"
#include "meshflow/data/tokenizer.h"

namespace mf {

class HfBpeTokenizer final : public Tokenizer {
 public:
  // Throws mf::Error naming the file when it is missing, not JSON, or outside what is supported.
  static HfBpeTokenizer from_file(const std::string& path, const std::string& eod_token = "");

  HfBpeTokenizer(HfBpeTokenizer&&) noexcept;
  HfBpeTokenizer& operator=(HfBpeTokenizer&&) noexcept;
  ~HfBpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_bytes_.size()); }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "hf-bpe"; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;

  int64_t num_merges() const { return merges_.num_merges(); }
  int64_t num_added_tokens() const { return static_cast<int64_t>(added_.size()); }
  // The id of an added token or of a vocabulary token given by its text (bytes); -1 if none.
  int32_t token_id(std::string_view text) const;

 private:
  struct Loader;
  struct AddedToken {
    std::string text;
    int32_t id;
  };
  HfBpeTokenizer();

  // Encodes text that holds no added token: normalise, pre-tokenise, merge each piece.
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  // The added token at text[i] (the longest), or nullptr.
  const AddedToken* added_token_at(std::string_view text, size_t i) const;

  std::vector<std::string> id_to_bytes_;  // a vocabulary token's bytes; an added token's text
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  int32_t byte_id_[256] = {};
  bpe::MergeTable merges_;
  bool ignore_merges_ = false;
  bool nfc_ = false;
  int max_number_run_ = 0;  // Llama 3 / Qwen2 pattern: 3 or 1; 0: GPT-2's pattern
  std::vector<AddedToken> added_;
  std::vector<std::vector<int32_t>> added_by_first_byte_;  // indices into added_, longest first
  int32_t eod_id_ = -1;
  std::unique_ptr<bpe::PieceCache> cache_;
};

}  // namespace mf
