// SentencePieceTokenizer: loading, encode and decode through libsentencepiece.
#include "meshflow/data/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "meshflow/core/error.h"

namespace mf {

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::from_file(const std::string& path, const std::string& eod_token) {
  MF_CHECK(std::filesystem::is_regular_file(path), "SentencePiece model ", path, ": no such file");
  SentencePieceTokenizer tok;
  tok.path_ = path;
  auto status = tok.sp_->Load(path);
  MF_CHECK(status.ok(), "SentencePiece model ", path, ": cannot load, not a SentencePiece model? (",
           status.ToString(), ")");
  tok.vocab_size_ = tok.sp_->GetPieceSize();
  MF_CHECK(tok.vocab_size_ > 0, "SentencePiece model ", path, ": no pieces");
  if (eod_token.empty()) {
    tok.eod_id_ = tok.sp_->eos_id();
    MF_CHECK(tok.eod_id_ >= 0, "SentencePiece model ", path,
             ": the model has no end-of-sentence piece; set tokenization.eod_token");
  } else {
    tok.eod_id_ = tok.piece_id(eod_token);
    MF_CHECK(tok.eod_id_ >= 0, "SentencePiece model ", path, ": the end-of-document token '", eod_token,
             "' (tokenization.eod_token) is not a piece");
  }
  return tok;
}

int32_t SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }

int32_t SentencePieceTokenizer::piece_id(const std::string& piece) const {
  int id = sp_->PieceToId(piece);
  // PieceToId answers unk_id for an unknown piece.
  return (id == sp_->unk_id() && sp_->IdToPiece(id) != piece) ? -1 : id;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  MF_CHECK(status.ok(), "SentencePiece model ", path_, ": encode failed (", status.ToString(), ")");
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out, text;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    auto status = sp_->Decode(run, &text);
    MF_CHECK(status.ok(), "SentencePiece model ", path_, ": decode failed (", status.ToString(), ")");
    out += text;
    run.clear();
  };
  for (int32_t id : ids) {
    MF_CHECK(id >= 0 && id < vocab_size_, "SentencePieceTokenizer::decode: id ", id, " outside [0, ", vocab_size_,
             ")");
    if (sp_->IsControl(id)) {
      flush();
      out += sp_->IdToPiece(id);
    } else {
      run.push_back(id);
    }
  }
  flush();
  return out;
}

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  int32_t id = piece_id(std::string(token));
  if (id < 0) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::id_to_token(int32_t id) const {
  MF_CHECK(id >= 0 && id < vocab_size_, "SentencePiece model ", path_, ": id ", id, " outside [0, ", vocab_size_, ")");
  return sp_->IdToPiece(id);
}

}  // namespace mf
