// UTF-8 decoding and the three character classes the GPT-2 and Llama 3 pre-tokenisers need:
// letters (\p{L}), numbers (\p{N}) and white space (\s). Letters and numbers come from generated
// tables (unicode_tables.cpp, Unicode 17 from node's regex engine); white space is Unicode's
// White_Space property (25 code points), which is what \s matches in the engines of the original
// encoders: Python's `regex` package (OpenAI's GPT-2 encoder), Oniguruma (Hugging Face
// tokenizers) and Rust's regex (tiktoken). It is not JavaScript's \s (which adds U+FEFF and
// lacks U+0085) nor Python's str.isspace (which adds U+001C-001F).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mf::unicode {

bool is_letter_table(char32_t cp);
bool is_number_table(char32_t cp);

inline bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return is_letter_table(cp);
}
inline bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return is_number_table(cp);
}
// Unicode White_Space: U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F, 3000.
inline bool is_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r');
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// A code point that is never a letter, number or space: stands for a byte that does not start a
// valid UTF-8 sequence (each such byte is its own "character", so any byte string tokenises).
inline constexpr char32_t kInvalid = 0xFFFFFFFF;

// Decodes the code point at s[i]; sets `len` to its byte length (1 for an invalid byte, which
// yields kInvalid). Rejects overlong forms, surrogates and values above U+10FFFF.
inline char32_t decode_utf8(std::string_view s, size_t i, size_t& len) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  len = 1;
  if (c < 0x80) return c;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return kInvalid;
  char32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return kInvalid;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return kInvalid;
  len = n;
  return cp;
}

}  // namespace mf::unicode
