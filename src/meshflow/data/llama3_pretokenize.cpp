// Llama 3 / Qwen2 pre-tokenisation: see llama3_pretokenize.h for the pattern matched.
#include "meshflow/data/llama3_pretokenize.h"

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

Cls class_at(std::string_view text, size_t i, size_t& len) { return classify(unicode::decode_utf8(text, i, len)); }

// End of the run of characters of class `cls` starting at i (at most `max_chars` of them).
size_t run_end(std::string_view text, size_t i, Cls cls, size_t max_chars = SIZE_MAX) {
  size_t len;
  for (size_t count = 0; i < text.size() && count < max_chars && class_at(text, i, len) == cls; ++count) i += len;
  return i;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// Length of the contraction ('s 't 're 've 'm 'll 'd, any ASCII case) starting at text[i], or 0.
size_t contraction(std::string_view text, size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  char a = lower(text[i + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  char b = lower(text[i + 2]);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

bool is_newline(char c) { return c == '\r' || c == '\n'; }

// End of the white-space piece starting at i (text[i] is white space): the last three
// alternatives of the pattern.
size_t whitespace_piece_end(std::string_view text, size_t i) {
  const size_t n = text.size();
  size_t len, k = i, last_start = i, chars = 0;
  size_t last_newline = std::string_view::npos;
  while (k < n && class_at(text, k, len) == Cls::kSpace) {
    if (is_newline(text[k])) last_newline = k;
    last_start = k;
    k += len;
    ++chars;
  }
  // \s*[\r\n]+ : the greedy \s* gives back characters until a newline follows, so the piece
  // ends just after the run's last newline.
  if (last_newline != std::string_view::npos) return last_newline + 1;
  // \s+(?!\S) : the whole run at the end of the text, else all but its last character; \s+ : a
  // single white-space character before a non-space.
  if (k == n || chars == 1) return k;
  return last_start;
}

// End of the piece that starts at i.
size_t piece_end(std::string_view text, size_t i, int max_number_run) {
  const size_t n = text.size();
  if (size_t c = contraction(text, i)) return i + c;
  size_t len;
  Cls cls = class_at(text, i, len);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls == Cls::kLetter) return run_end(text, i, Cls::kLetter);
  size_t next_len;
  if (cls != Cls::kNumber && !is_newline(text[i]) && i + len < n &&
      class_at(text, i + len, next_len) == Cls::kLetter)
    return run_end(text, i + len, Cls::kLetter);
  // \p{N}{1,3} (Llama 3) or \p{N} (Qwen2)
  if (cls == Cls::kNumber) return run_end(text, i, Cls::kNumber, static_cast<size_t>(max_number_run));
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t j = text[i] == ' ' ? i + 1 : i;
  if (j < n && class_at(text, j, next_len) == Cls::kOther) {
    size_t k = run_end(text, j, Cls::kOther);
    while (k < n && is_newline(text[k])) ++k;
    return k;
  }
  return whitespace_piece_end(text, i);  // text[i] is white space here
}

}  // namespace

std::optional<int> llama3_pattern_number_run(std::string_view regex) {
  if (regex == kLlama3SplitRegex) return 3;
  if (regex == kQwen2SplitRegex) return 1;
  return std::nullopt;
}

void llama3_pretokenize(std::string_view text, int max_number_run, std::vector<std::string_view>& pieces) {
  pieces.clear();
  for (size_t i = 0; i < text.size();) {
    size_t end = piece_end(text, i, max_number_run);
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace mf
