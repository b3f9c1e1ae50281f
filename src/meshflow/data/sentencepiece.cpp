// SentencePieceTokenizer: loading, encode and decode through libsentencepiece, and T5's sentinels.
#include "meshflow/data/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <cstdint>
#include <limits>

#include "meshflow/core/error.h"
#include "meshflow/core/regular_file.h"

namespace mf {
namespace {

constexpr std::string_view kSentinelPrefix = "<extra_id_";

std::string sentinel_text(int64_t k) { return std::string(kSentinelPrefix) + std::to_string(k) + ">"; }

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::from_file(const std::string& path, const std::string& eod_token,
                                                         int64_t extra_ids) {
  check_regular_file(path, "SentencePiece model", kMaxTokenizerFileBytes);
  SentencePieceTokenizer tok;
  tok.path_ = path;
  auto status = tok.sp_->Load(path);
  MF_CHECK(status.ok(), "SentencePiece model ", path, ": cannot load, not a SentencePiece model? (",
           status.ToString(), ")");
  tok.piece_size_ = tok.sp_->GetPieceSize();
  MF_CHECK(tok.piece_size_ > 0, "SentencePiece model ", path, ": no pieces");
  MF_CHECK(extra_ids >= 0, "SentencePiece model ", path, ": extra_ids (tokenization.extra_ids) is ", extra_ids,
           ", expected 0 or more (T5: 100)");
  MF_CHECK(extra_ids <= std::numeric_limits<int32_t>::max() - tok.piece_size_, "SentencePiece model ", path,
           ": extra_ids (tokenization.extra_ids) ", extra_ids, " makes the vocabulary larger than int32 ids allow");
  tok.extra_ids_ = extra_ids;
  for (int64_t k = 0; k < extra_ids; ++k) {
    int32_t id = tok.piece_id(sentinel_text(k));
    MF_CHECK(id < 0, "SentencePiece model ", path, " already has the piece ", sentinel_text(k), " (id ", id,
             "), which tokenization.extra_ids ", extra_ids, " would add after its pieces; set extra_ids to 0");
  }
  if (eod_token.empty()) {
    tok.eod_id_ = tok.sp_->eos_id();
    MF_CHECK(tok.eod_id_ >= 0, "SentencePiece model ", path,
             ": the model has no end-of-sentence piece; set tokenization.eod_token");
  } else {
    auto id = tok.token_to_id(eod_token);
    MF_CHECK(id.has_value(), "SentencePiece model ", path, ": the end-of-document token '", eod_token,
             "' (tokenization.eod_token) is not a piece", extra_ids > 0 ? " or a sentinel" : "");
    tok.eod_id_ = *id;
  }
  return tok;
}

int32_t SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }

int32_t SentencePieceTokenizer::piece_id(const std::string& piece) const {
  int id = sp_->PieceToId(piece);
  // PieceToId answers unk_id for an unknown piece.
  return (id == sp_->unk_id() && sp_->IdToPiece(id) != piece) ? -1 : id;
}

int32_t SentencePieceTokenizer::sentinel_id(int64_t k) const {
  MF_CHECK(k >= 0 && k < extra_ids_, "SentencePiece model ", path_, ": no sentinel <extra_id_", k, "> (extra_ids is ",
           extra_ids_, ")");
  return static_cast<int32_t>(piece_size_ + extra_ids_ - 1 - k);
}

std::optional<int64_t> SentencePieceTokenizer::sentinel_at(std::string_view text, size_t pos, size_t* len) const {
  if (text.substr(pos, kSentinelPrefix.size()) != kSentinelPrefix) return std::nullopt;
  size_t i = pos + kSentinelPrefix.size();
  const size_t digits = i;
  int64_t k = 0;
  // Exactly the texts "<extra_id_0>" .. "<extra_id_{N-1}>": decimal, no sign, no leading zero.
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    k = k * 10 + (text[i] - '0');
    if (k >= extra_ids_) return std::nullopt;
    ++i;
  }
  if (i == digits || i >= text.size() || text[i] != '>') return std::nullopt;
  if (text[digits] == '0' && i - digits > 1) return std::nullopt;
  *len = i + 1 - pos;
  return k;
}

void SentencePieceTokenizer::encode_pieces(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<int> ids;
  auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  MF_CHECK(status.ok(), "SentencePiece model ", path_, ": encode failed (", status.ToString(), ")");
  out.insert(out.end(), ids.begin(), ids.end());
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  if (extra_ids_ == 0) {
    encode_pieces(text, out);
    return out;
  }
  // Leftmost sentinel first; they cannot overlap (each ends at its first '>').
  size_t start = 0, pos = 0, len = 0;
  while ((pos = text.find(kSentinelPrefix, pos)) != std::string_view::npos) {
    auto k = sentinel_at(text, pos, &len);
    if (!k) {
      ++pos;
      continue;
    }
    encode_pieces(text.substr(start, pos - start), out);
    out.push_back(sentinel_id(*k));
    pos += len;
    start = pos;
  }
  encode_pieces(text.substr(start), out);
  return out;
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
  const int64_t vocab = vocab_size();
  for (int32_t id : ids) {
    MF_CHECK(id >= 0 && id < vocab, "SentencePieceTokenizer::decode: id ", id, " outside [0, ", vocab, ")");
    if (id >= piece_size_) {  // a sentinel
      flush();
      out += sentinel_text(piece_size_ + extra_ids_ - 1 - id);
    } else if (sp_->IsControl(id)) {
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
  size_t len = 0;
  if (extra_ids_ > 0)
    if (auto k = sentinel_at(token, 0, &len); k && len == token.size()) return sentinel_id(*k);
  int32_t id = piece_id(std::string(token));
  if (id < 0) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::id_to_token(int32_t id) const {
  MF_CHECK(id >= 0 && id < vocab_size(), "SentencePiece model ", path_, ": id ", id, " outside [0, ", vocab_size(),
           ")");
  if (id >= piece_size_) return sentinel_text(piece_size_ + extra_ids_ - 1 - id);
  return sp_->IdToPiece(id);
}

}  // namespace mf
