#include "meshflow/infer/text_stream.h"

#include <span>

namespace mf::infer {

size_t complete_utf8_prefix(const std::string& s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back >= len ? n : n - back;
  }
  return n;  // only continuation bytes: not UTF-8 we can wait for
}

std::string TextStream::text() const { return tok_->decode(std::span<const int32_t>(ids_.data(), ids_.size())); }

std::string TextStream::push(int64_t token) {
  ids_.push_back(static_cast<int32_t>(token));
  const std::string all = text();
  const size_t end = complete_utf8_prefix(all);
  if (end <= emitted_) return "";
  std::string out = all.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string TextStream::flush() {
  const std::string all = text();
  std::string out = all.size() > emitted_ ? all.substr(emitted_) : "";
  emitted_ = all.size();
  return out;
}

}  // namespace mf::infer
