// BERT's WordPiece tokenizer over a `vocab.txt` (one token a line, the id is the line number), as
// Hugging Face's BertTokenizer defines it (BasicTokenizer, then WordpieceTokenizer):
//   - the special tokens [CLS], [SEP], [MASK], [PAD], [UNK] written in the text (exactly, case
//     included) stay those tokens and are never split or lower-cased;
//   - clean text: U+0000, U+FFFD (and so invalid UTF-8) and control / format characters (Unicode
//     category C*, tab, newline and carriage return excepted) dropped, white space (Unicode
//     White_Space as the fast BertTokenizer has it: Zs, U+2028, U+2029, \t \n \r) becomes a
//     space; CJK ideographs become words of their own; NFC;
//   - split on white space; with `lower_case` (BERT uncased, the default) each word lower-cased,
//     then NFD and its combining marks (Mn) dropped (accent stripping); split on punctuation (the
//     ASCII non-alphanumeric ranges !-/ :-@ [-` {-~ and Unicode P*), each punctuation character a
//     word of its own;
//   - greedy longest-match-first WordPiece per word, continuation pieces prefixed "##"; a word of
//     more than 100 characters, or one with a part no piece matches, is a single [UNK].
// encode() adds no [CLS] / [SEP]. End of document: [SEP] (BERT's separator), or `eod_token`.
// decode() joins the tokens with spaces and glues "##" pieces to the one before (BERT's
// convert_tokens_to_string); it is lossy: decode(encode(s)) is the normalised text (lower-cased,
// accents stripped, punctuation and CJK characters space-separated, white-space runs single
// spaces, unknown words [UNK]), not s.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "meshflow/data/tokenizer.h"

namespace mf {

class WordPieceTokenizer final : public Tokenizer {
 public:
  static constexpr int kMaxWordChars = 100;
  // Throws mf::Error naming the file when it is missing, empty, or lacks [UNK] or the
  // end-of-document token.
  static WordPieceTokenizer from_file(const std::string& path, bool lower_case = true,
                                      const std::string& eod_token = "");

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "wordpiece"; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;

  bool lower_case() const { return lower_case_; }
  int32_t unk_id() const { return unk_id_; }
  // The id of a token ("the", "##s", "[CLS]"); -1 if it is not in the vocabulary.
  int32_t token_id(const std::string& token) const;
  // The words BasicTokenizer makes of `text` (special tokens included), before WordPiece.
  std::vector<std::string> basic_tokenize(std::string_view text) const;

 private:
  void encode_segment(std::string_view text, std::vector<int32_t>& ids) const;
  void wordpiece(const std::u32string& word, std::vector<int32_t>& ids) const;
  std::vector<std::u32string> basic_words(std::string_view text) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::pair<std::string, int32_t>> specials_;  // those of the five in the vocabulary
  bool lower_case_ = true;
  int32_t unk_id_ = -1;
  int32_t eod_id_ = -1;
};

}  // namespace mf
