// HfBpeTokenizer: added tokens, normalisation, pre-tokenisation and merges on encode; decode.
// Loading tokenizer.json is in hf_bpe_load.cpp.
#include "meshflow/data/hf_bpe.h"

#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_pretokenize.h"
#include "meshflow/data/llama3_pretokenize.h"
#include "meshflow/data/unicode.h"
#include "meshflow/data/unicode_nfc.h"

namespace mf {
namespace {

constexpr std::string_view kMetaspace = "\u2581";  // "▁", SentencePiece's space

// Llama 2's normaliser: "▁" before the text and in place of each space.
std::string metaspace_normalize(std::string_view text) {
  std::string out(kMetaspace);
  out.reserve(text.size() + text.size() / 4 + 8);
  for (char c : text) {
    if (c == ' ')
      out += kMetaspace;
    else
      out.push_back(c);
  }
  return out;
}

}  // namespace

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

void HfBpeTokenizer::initial_symbols(std::string_view piece, std::vector<int32_t>& word) const {
  word.clear();
  if (!byte_fallback_) {
    word.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    return;
  }
  word.reserve(piece.size());
  for (size_t i = 0, len = 0; i < piece.size(); i += len) {
    unicode::decode_utf8(piece, i, len);  // an invalid byte is a character of its own
    auto it = bytes_to_id_.find(piece.substr(i, len));
    if (it != bytes_to_id_.end()) {
      word.push_back(it->second);
    } else {
      for (size_t k = i; k < i + len; ++k) word.push_back(byte_id_[static_cast<unsigned char>(piece[k])]);
    }
  }
}

void HfBpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (cache_->append(piece, ids)) return;
  std::vector<int32_t> word;
  auto whole = ignore_merges_ ? bytes_to_id_.find(piece) : bytes_to_id_.end();
  if (whole != bytes_to_id_.end()) {
    word.push_back(whole->second);
  } else {
    initial_symbols(piece, word);
    merges_.apply(word);
  }
  ids.insert(ids.end(), word.begin(), word.end());
  cache_->store(piece, word);
}

void HfBpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  if (byte_fallback_) {  // no pre-tokeniser: the normalised text is one word
    encode_piece(metaspace_normalize(text), ids);
    return;
  }
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
  for (int32_t id : ids)
    MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "HfBpeTokenizer::decode: id ", id,
             " outside [0, ", id_to_bytes_.size(), ")");
  if (byte_fallback_) {
    decode_byte_fallback(ids, out);
    return out;
  }
  for (int32_t id : ids) out += id_to_bytes_[static_cast<size_t>(id)];
  return out;
}

void HfBpeTokenizer::decode_byte_fallback(std::span<const int32_t> ids, std::string& out) const {
  for (int32_t id : ids) {
    const int16_t byte = fallback_byte_[static_cast<size_t>(id)];
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    const std::string& token = id_to_bytes_[static_cast<size_t>(id)];
    for (size_t i = 0; i < token.size();) {
      if (token.compare(i, kMetaspace.size(), kMetaspace) == 0) {
        out.push_back(' ');
        i += kMetaspace.size();
      } else {
        out.push_back(token[i++]);
      }
    }
  }
  if (!out.empty() && out[0] == ' ') out.erase(0, 1);  // Strip(" ", 1, 0): the first "▁" of the text
}

int32_t HfBpeTokenizer::token_id(std::string_view text) const {
  for (const AddedToken& t : added_)
    if (t.text == text) return t.id;
  auto it = bytes_to_id_.find(text);
  return it == bytes_to_id_.end() ? -1 : it->second;
}

std::optional<int32_t> HfBpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : added_)
    if (t.text == token) return t.id;
  std::string bytes(token);  // byte fallback: tokens are spelled as they are
  if (!byte_fallback_ && !bpe::unicode_to_bytes(token, bytes)) return std::nullopt;
  auto it = bytes_to_id_.find(bytes);
  if (it == bytes_to_id_.end()) return std::nullopt;
  return it->second;
}

std::string HfBpeTokenizer::id_to_token(int32_t id) const {
  MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "HfBpeTokenizer: id ", id, " outside [0, ",
           id_to_bytes_.size(), ")");
  for (const AddedToken& t : added_)
    if (t.id == id) return t.text;
  if (byte_fallback_) return id_to_bytes_[static_cast<size_t>(id)];
  std::string out;
  for (char b : id_to_bytes_[static_cast<size_t>(id)]) out += bpe::byte_to_unicode()[static_cast<unsigned char>(b)];
  return out;
}

}  // namespace mf
