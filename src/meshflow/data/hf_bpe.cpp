// HfBpeTokenizer: added tokens, normalisation, pre-tokenisation and merges on encode; decode.
// Loading tokenizer.json is in hf_bpe_load.cpp.
#include "meshflow/data/hf_bpe.h"

#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_pretokenize.h"
#include "meshflow/data/llama3_pretokenize.h"
#include "meshflow/data/unicode_nfc.h"

namespace mf {

HfBpeTokenizer::HfBpeTokenizer() : added_by_first_byte_(256), cache_(std::make_unique<bpe::PieceCache>()) {}
HfBpeTokenizer::HfBpeTokenizer(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer& HfBpeTokenizer::operator=(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer::~HfBpeTokenizer() = default;

const HfBpeTokenizer::AddedToken* HfBpeTokenizer::added_token_at(std::string_view text, size_t i) const {
  for (int32_t k : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {
    const AddedToken& t = added_[static_cast<size_t>(k)];
    if (text.substr(i, t.text.size()) == t.text) return &t;
  }
  return nullptr;
}

void HfBpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (cache_->append(piece, ids)) return;
  std::vector<int32_t> word;
  auto whole = ignore_merges_ ? bytes_to_id_.find(std::string(piece)) : bytes_to_id_.end();
  if (whole != bytes_to_id_.end()) {
    word.push_back(whole->second);
  } else {
    word.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    merges_.apply(word);
  }
  ids.insert(ids.end(), word.begin(), word.end());
  cache_->store(piece, word);
}

void HfBpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::string normalized;
  if (nfc_) {
    unicode::append_nfc(text, normalized);
    text = normalized;
  }
  std::vector<std::string_view> pieces;
  if (max_number_run_ > 0)
    llama3_pretokenize(text, max_number_run_, pieces);
  else
    gpt2_pretokenize(text, pieces);
  for (std::string_view p : pieces) encode_piece(p, ids);
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* t = added_token_at(text, i);
    if (!t) {
      ++i;
      continue;
    }
    encode_ordinary(text.substr(start, i - start), ids);
    ids.push_back(t->id);
    i += t->text.size();
    start = i;
  }
  encode_ordinary(text.substr(start), ids);
  return ids;
}

std::string HfBpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "HfBpeTokenizer::decode: id ", id,
             " outside [0, ", id_to_bytes_.size(), ")");
    out += id_to_bytes_[static_cast<size_t>(id)];
  }
  return out;
}

int32_t HfBpeTokenizer::token_id(std::string_view text) const {
  for (const AddedToken& t : added_)
    if (t.text == text) return t.id;
  auto it = bytes_to_id_.find(std::string(text));
  return it == bytes_to_id_.end() ? -1 : it->second;
}

std::optional<int32_t> HfBpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : added_)
    if (t.text == token) return t.id;
  std::string bytes;
  if (!bpe::unicode_to_bytes(token, bytes)) return std::nullopt;
  auto it = bytes_to_id_.find(bytes);
  if (it == bytes_to_id_.end()) return std::nullopt;
  return it->second;
}

std::string HfBpeTokenizer::id_to_token(int32_t id) const {
  MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "HfBpeTokenizer: id ", id, " outside [0, ",
           id_to_bytes_.size(), ")");
  for (const AddedToken& t : added_)
    if (t.id == id) return t.text;
  std::string out;
  for (char b : id_to_bytes_[static_cast<size_t>(id)]) out += bpe::byte_to_unicode()[static_cast<unsigned char>(b)];
  return out;
}

}  // namespace mf
