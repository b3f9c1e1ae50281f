#include "meshflow/infer/text_stream.h"

#include <algorithm>
#include <span>

#include "meshflow/core/error.h"

namespace mf::infer {

size_t complete_utf8_prefix(const std::string& s) {
  // Walk back over at most 3 continuation bytes (10xxxxxx) to the last lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t need = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return back < need ? n - back : n;
  }
  return n;  // only continuation bytes at the end: nothing will complete them
}

bool in_vocabulary(const Tokenizer& tok, int64_t id) { return id >= 0 && id < tok.vocab_size(); }

std::string decode_known(const Tokenizer& tok, std::span<const int64_t> ids) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int64_t id : ids)
    if (in_vocabulary(tok, id)) known.push_back(static_cast<int32_t>(id));
  return tok.decode(known);
}

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings, std::vector<int64_t> stop_tokens)
    : tok_(tok), stops_(std::move(stop_strings)), stop_tokens_(std::move(stop_tokens)) {
  for (const std::string& s : stops_) MF_CHECK(!s.empty(), "TextStream: an empty stop string");
}

std::string TextStream::push(int64_t token) {
  MF_CHECK(!stopped_, "TextStream::push: the row has already stopped");
  ++tokens_;
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), token) != stop_tokens_.end()) {
    stopped_ = true;
    return finish();
  }
  // An id the tokenizer lacks (a model's vocabulary padded past its tokenizer's, as Qwen2's 151936
  // rows for 151665 tokens) has no text: it renders as nothing, as Hugging Face's decode skips it.
  if (!in_vocabulary(tok_, token)) return advance(false);
  ids_.push_back(static_cast<int32_t>(token));
  // Decode the tokens not yet read with the last read ones before them as context (a
  // SentencePiece piece's leading space depends on what precedes it); their text is final once
  // it is complete UTF-8.
  const std::span<const int32_t> all(ids_);
  const std::string before = tok_.decode(all.subspan(prefix_, read_ - prefix_));
  const std::string now = tok_.decode(all.subspan(prefix_));
  if (now == before) {
    read_ = ids_.size();  // a token with no text of its own
  } else if (now.size() > before.size() && now.compare(0, before.size(), before) == 0) {
    const std::string added = now.substr(before.size());
    if (complete_utf8_prefix(added) == added.size()) {
      decoded_ += added;
      prefix_ = read_;
      read_ = ids_.size();
    }
  }
  return advance(false);
}

std::string TextStream::finish() {
  if (read_ < ids_.size()) {  // text still waiting for bytes that will not come: give it as it is
    const std::span<const int32_t> all(ids_);
    const std::string before = tok_.decode(all.subspan(prefix_, read_ - prefix_));
    const std::string now = tok_.decode(all.subspan(prefix_));
    decoded_ += now.substr(std::min(before.size(), now.size()));
    prefix_ = read_ = ids_.size();
  }
  return advance(true);
}

std::string TextStream::advance(bool last) {
  const std::string pending = decoded_.substr(emitted_.size());
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, pending.find(s));
  std::string out;
  if (cut != std::string::npos) {
    out = pending.substr(0, cut);
    stopped_ = true;
  } else if (last) {
    out = pending;
  } else {
    // Hold back the longest tail of the text that is the beginning of a stop string.
    size_t hold = 0;
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, pending.size()); k > hold; --k)
        if (pending.compare(pending.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    out = pending.substr(0, pending.size() - hold);
  }
  emitted_ += out;
  return out;
}

}  // namespace mf::infer
