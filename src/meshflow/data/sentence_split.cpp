// Rule-based sentence splitter (see sentence_split.h).
#include "meshflow/data/sentence_split.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <iterator>

#include "meshflow/data/unicode.h"

namespace mf {
namespace {

// Lower-case, without the final '.'; entries with inner dots match dotted words whole.
constexpr std::string_view kAbbreviations[] = {
    "mr",   "mrs",  "ms",   "dr",   "prof", "st",   "vs",   "etc",  "e.g",  "i.e",  "jr",   "sr",
    "inc",  "ltd",  "co",   "corp", "mt",   "no",   "nos",  "fig",  "figs", "u.s",  "u.k",  "u.s.a",
    "gen",  "gov",  "sen",  "rep",  "rev",  "col",  "capt", "lt",   "sgt",  "cf",   "al",   "approx",
    "dept", "est",  "jan",  "feb",  "mar",  "apr",  "aug",  "sep",  "sept", "oct",  "nov",  "dec",
    "ave",  "blvd", "rd",   "vol",  "ch",   "sec",  "eq",   "ed",   "eds",  "p.m"};

bool is_space(char32_t c) { return unicode::is_space(c); }

bool is_closing(char32_t c) {
  return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}' || c == 0x201D || c == 0x2019 || c == 0xBB;
}
bool is_opening(char32_t c) {
  return c == '"' || c == '\'' || c == '(' || c == '[' || c == '{' || c == 0x201C || c == 0x2018 || c == 0xAB;
}
bool is_terminal(char32_t c) { return c == '.' || c == '!' || c == '?'; }

// Can a sentence start with this character?
bool starts_sentence(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || is_opening(c);
  if (c == unicode::kInvalid) return false;
  return is_opening(c) || u_isupper(static_cast<UChar32>(c)) || u_istitle(static_cast<UChar32>(c)) ||
         u_isdigit(static_cast<UChar32>(c));
}

char32_t at(std::string_view s, size_t i, size_t& len) { return unicode::decode_utf8(s, i, len); }

// The word ending just before s[dot] (the text since the previous white space, opening quotes
// and brackets stripped), ASCII-lower-cased.
std::string word_before(std::string_view s, size_t dot) {
  size_t b = dot;
  while (b > 0 && !(s[b - 1] == ' ' || (s[b - 1] >= '\t' && s[b - 1] <= '\r'))) --b;
  std::string w(s.substr(b, dot - b));
  size_t k = 0;
  while (k < w.size() && (w[k] == '"' || w[k] == '\'' || w[k] == '(' || w[k] == '[' || w[k] == '{')) ++k;
  w.erase(0, k);
  for (char& c : w)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return w;
}

bool is_ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A '.' after this word does not end a sentence.
bool no_break_after(const std::string& w) {
  if (w.empty()) return false;
  if (std::find(std::begin(kAbbreviations), std::end(kAbbreviations), w) != std::end(kAbbreviations)) return true;
  size_t len;
  char32_t c = at(w, 0, len);
  if (len == w.size() && c != unicode::kInvalid && unicode::is_letter(c)) return true;  // an initial
  // A dotted acronym: letters separated by single dots ("u.s", "ph.d", "a.b.c").
  bool dot = false, prev_dot = true;
  for (char ch : w) {
    if (ch == '.') {
      if (prev_dot) return false;
      dot = prev_dot = true;
    } else if (is_ascii_alpha(ch)) {
      prev_dot = false;
    } else {
      return false;
    }
  }
  return dot && !prev_dot;
}

void push_trimmed(std::string_view s, std::vector<std::string>& out) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t len;
    char32_t c = at(s, b, len);
    if (!is_space(c)) break;
    b += len;
  }
  while (e > b) {
    // Step back over one UTF-8 character.
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t len;
    char32_t c = at(s, k, len);
    if (k + len != e || !is_space(c)) break;
    e = k;
  }
  if (e > b) out.emplace_back(s.substr(b, e - b));
}

}  // namespace

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  const size_t n = text.size();
  while (i < n) {
    size_t len;
    char32_t c = at(text, i, len);
    if (c == '\n') {
      // A blank line: another newline before anything but white space.
      size_t k = i + 1;
      bool blank = false;
      while (k < n) {
        size_t l2;
        char32_t d = at(text, k, l2);
        if (d == '\n') blank = true;
        if (!is_space(d)) break;
        k += l2;
      }
      if (blank) {
        push_trimmed(text.substr(start, i - start), out);
        start = i = k;
        continue;
      }
      i += len;
      continue;
    }
    if (!is_terminal(c)) {
      i += len;
      continue;
    }
    // The run of terminators, then closing quotes and brackets.
    size_t j = i;
    size_t run = 0;
    while (j < n && is_terminal(static_cast<unsigned char>(text[j]))) ++j, ++run;
    for (;;) {
      if (j >= n) break;
      size_t l2;
      char32_t d = at(text, j, l2);
      if (!is_closing(d)) break;
      j += l2;
    }
    bool split = false;
    if (j >= n) {
      split = true;
    } else {
      size_t l2;
      if (is_space(at(text, j, l2))) {
        size_t k = j;
        char32_t d = 0;
        while (k < n) {
          d = at(text, k, l2);
          if (!is_space(d)) break;
          k += l2;
        }
        split = k >= n || starts_sentence(d);
      }
    }
    if (split && run == 1 && text[i] == '.' && no_break_after(word_before(text, i))) split = false;
    if (split) {
      push_trimmed(text.substr(start, j - start), out);
      start = j;
    }
    i = j;
  }
  push_trimmed(text.substr(start), out);
  return out;
}

}  // namespace mf
