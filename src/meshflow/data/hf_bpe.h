// BPE from a Hugging Face `tokenizer.json`: byte-level (Llama 3, Qwen2, GPT-2 and their kin) or
// SentencePiece-style with byte fallback (Llama 2, Mistral).
//
// What a file may hold (anything else is refused with one line naming the file and the field):
// - model: type "BPE" with `vocab` (token -> id) and `merges` ("a b" strings or ["a", "b"]
//   pairs, in rank order); `ignore_merges` (Llama 3: a piece that is itself a token is that
//   token, merges unused); no dropout, subword prefix or word suffix. Either
//   - byte-level: tokens in GPT-2's bytes->unicode alphabet, every single byte present; or
//   - `byte_fallback` true: tokens spelled as text with U+2581 ("▁") for a space, and the 256
//     tokens <0x00>..<0xFF>; a character that is not a token becomes the <0xNN> tokens of its
//     UTF-8 bytes (as does a byte that is not valid UTF-8).
// - normalizer: byte-level: none, or NFC (Qwen2; through ICU). Byte fallback: Llama 2's
//   Sequence[Prepend("▁"), Replace(" " -> "▁")] (a "▁" before the text and for each space).
// - pre_tokenizer: byte-level: Sequence[Split(Llama 3's or Qwen2's regex, Isolated),
//   ByteLevel(use_regex false)] (llama3_pretokenize.h), or ByteLevel(use_regex true) alone
//   (GPT-2's regex, gpt2_pretokenize.h); add_prefix_space false. Byte fallback: none (the
//   normalised text between two added tokens is one word).
// - decoder: byte-level: none or ByteLevel. Byte fallback: Llama 2's Sequence[Replace("▁" -> " "),
//   ByteFallback, Fuse, Strip(" ", 1, 0)]: "▁" decodes as a space, <0xNN> tokens as their bytes,
//   and one space at the start of the text is dropped. Unlike Hugging Face, which writes U+FFFD
//   for <0xNN> runs that are not valid UTF-8, decode() writes the bytes as they are (as for
//   byte-level BPE), so that a stream of tokens can wait for a character's last byte.
// - added_tokens: matched verbatim in the raw text before normalisation and pre-tokenisation,
//   leftmost and then longest first (as Hugging Face does), special or not; lstrip, rstrip and
//   single_word are not supported, nor `normalized` ones with a normalizer.
// encode() adds no begin-of-text token (the post_processor is not applied), so that
// decode(encode(s)) == s for NFC text (byte fallback: for text without U+2581, which decodes as
// a space, and without added tokens, after each of which the "▁" that starts the next stretch
// decodes as a space, as with Hugging Face); `meshflow preprocess` separates documents with the
// end-of-document token only. decode() writes an added token as its text.
//
// End of document: the `eod_token` given, else `<|end_of_text|>` (Llama 3) or `<|endoftext|>`
// (Qwen2, GPT-2) when the file has one, else (byte fallback) `</s>` (Llama 2, Mistral) when it
// has one, else the `eos_token` of a tokenizer_config.json beside the file. The first rules are
// the token these models' pre-training places between documents; tokenizer_config's eos is a
// chat model's end of turn in instruct releases (`<|eot_id|>`, `<|im_end|>`).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // Encodes text that holds no added token: normalise, pre-tokenise, merge each piece.
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  // A piece's symbols before merging: its bytes (byte-level), or its characters that are tokens
  // and the <0xNN> tokens of the others' bytes (byte fallback).
  void initial_symbols(std::string_view piece, std::vector<int32_t>& word) const;
  void decode_byte_fallback(std::span<const int32_t> ids, std::string& out) const;
  // The added token at text[i] (the longest), or nullptr.
  const AddedToken* added_token_at(std::string_view text, size_t i) const;

  // A vocabulary token's bytes (byte fallback: its spelling, "▁the", "<0x0A>"); an added token's text.
  std::vector<std::string> id_to_bytes_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> bytes_to_id_;
  int32_t byte_id_[256] = {};  // the token of each byte (byte fallback: <0xNN>)
  bool byte_fallback_ = false;
  std::vector<int16_t> fallback_byte_;  // byte fallback: the byte of an <0xNN> token's id, else -1
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
