// A SentencePiece model (`tokenizer.model`: Llama 2, Mistral; `spiece.model`: T5, mT5) through
// Debian's libsentencepiece.
//
// encode() is the model's own encoding (its normaliser, the dummy-prefix space, byte fallback)
// and adds no begin-of-sentence token — Llama 2 / Mistral's <s> is a prompt convention, and
// `meshflow preprocess` separates documents with the end-of-document token only. Control
// symbols (<s>, </s>) in the text are encoded as text, as SentencePiece does. decode() writes a
// control id as its piece text ("</s>") and decodes the ids between them with SentencePiece,
// which drops the dummy-prefix space at the start of each such run. decode(encode(s)) == s for
// valid UTF-8 that the model's normaliser leaves unchanged (Llama 2's is the identity); invalid
// UTF-8 bytes become U+FFFD.
//
// T5's sentinels (`extra_ids` = N > 0, tokenization.extra_ids; T5 and mT5 use 100), as Hugging
// Face's T5Tokenizer has them: the vocabulary is the model's pieces followed by N ids, and
// `<extra_id_k>` (0 <= k < N) is id piece_size() + N - 1 - k, so <extra_id_0> is the last id.
// encode() takes each `<extra_id_k>` written in the text as that one id (HF's additional special
// tokens; "<extra_id_N>" and beyond, or "<extra_id_07>", stay text) and encodes the text between
// them with SentencePiece, each stretch on its own (each gets the dummy prefix; with
// remove_extra_whitespaces, T5's setting and spm_train's default, white space next to a sentinel
// gives no token, as with HF's lstrip/rstrip). decode()
// writes a sentinel as its text, like a control piece. token_to_id / id_to_token / vocab_size
// cover the sentinels.
//
// End of document: the token `eod_token` when given (a piece or a sentinel), else the model's
// eos (`</s>`; T5: id 1).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "meshflow/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mf {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws mf::Error naming the file when it is missing or not a SentencePiece model, when
  // extra_ids is negative or too large, or when the model already has a piece `<extra_id_k>`
  // that extra_ids would add.
  static SentencePieceTokenizer from_file(const std::string& path, const std::string& eod_token = "",
                                          int64_t extra_ids = 0);

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return piece_size_ + extra_ids_; }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "sentencepiece"; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;

  int32_t bos_id() const;  // the model's <s>, -1 if it has none
  // The id of a piece of the model (e.g. "▁the", "</s>"); -1 if it is not in the model (sentinels
  // are not pieces: token_to_id finds them).
  int32_t piece_id(const std::string& piece) const;
  int64_t piece_size() const { return piece_size_; }  // the model's pieces, without the sentinels
  int64_t extra_ids() const { return extra_ids_; }
  // The id of <extra_id_k>: piece_size() + extra_ids() - 1 - k. Throws unless 0 <= k < extra_ids().
  int32_t sentinel_id(int64_t k) const;

 private:
  SentencePieceTokenizer();
  // k when `text` holds <extra_id_k> (k < extra_ids_) at `pos`, and its length in `len`.
  std::optional<int64_t> sentinel_at(std::string_view text, size_t pos, size_t* len) const;
  void encode_pieces(std::string_view text, std::vector<int32_t>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  int64_t piece_size_ = 0;
  int64_t extra_ids_ = 0;
  int32_t eod_id_ = -1;
};

}  // namespace mf
