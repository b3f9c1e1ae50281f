// GPT-2 pre-tokenisation: see gpt2_pretokenize.h for the pattern matched.
#include "meshflow/data/gpt2_pretokenize.h"

#include "meshflow/data/unicode.h"

namespace mf {
namespace {

enum class Cls { kLetter, kNumber, kSpace, kOther };

Cls classify(char32_t cp) {
  if (unicode::is_letter(cp)) return Cls::kLetter;
  if (unicode::is_number(cp)) return Cls::kNumber;
  if (unicode::is_space(cp)) return Cls::kSpace;
  return Cls::kOther;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, case-sensitive) starting at text[i], or 0.
size_t contraction(std::string_view text, size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  char a = text[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  char b = text[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& pieces) {
  pieces.clear();
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (size_t c = contraction(text, i)) {
      pieces.push_back(text.substr(i, c));
      i += c;
      continue;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
    size_t j = text[i] == ' ' ? i + 1 : i;
    if (j < n) {
      size_t len;
      Cls cls = classify(unicode::decode_utf8(text, j, len));
      if (cls != Cls::kSpace) {
        size_t k = j + len;
        while (k < n && classify(unicode::decode_utf8(text, k, len)) == cls) k += len;
        pieces.push_back(text.substr(i, k - i));
        i = k;
        continue;
      }
    }
    // White space at i: `\s+(?!\S)` takes the run minus its last character when a non-space
    // follows (the whole run at the end of the text); a single space before a non-space falls
    // through to `\s+`.
    size_t len;
    unicode::decode_utf8(text, i, len);
    size_t k = i + len, last = i;
    while (k < n) {
      char32_t cp = unicode::decode_utf8(text, k, len);
      if (!unicode::is_space(cp)) break;
      last = k;
      k += len;
    }
    size_t end = (k < n && last > i) ? last : k;
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace mf
