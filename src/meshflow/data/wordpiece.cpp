// BERT WordPiece (see wordpiece.h). Character classes and normalisation through ICU.
#include "meshflow/data/wordpiece.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <fstream>
#include <mutex>

#include "meshflow/core/error.h"
#include "meshflow/core/regular_file.h"
#include "meshflow/data/unicode.h"

namespace mf {
namespace {

// White space as Hugging Face's BertNormalizer and BertPreTokenizer (the fast BertTokenizer and
// transformers.js) have it: Unicode White_Space, so the line and paragraph separators U+2028 /
// U+2029 split words too (the slow Python BasicTokenizer counts only Zs and \t \n \r). The
// White_Space characters of category Cc other than \t \n \r (U+000B, U+000C, U+0085) are control
// characters and are dropped before this is asked.
bool is_whitespace(char32_t c) { return unicode::is_space(c); }

// _is_control: category C* (Cc, Cf, Cn, Co, Cs), tab / newline / carriage return excepted.
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// _is_punctuation: the ASCII non-alphanumeric ranges, or category P*.
bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  return u_ispunct(static_cast<UChar32>(c));
}

// _is_chinese_char: the CJK Unified Ideographs blocks and their extensions / compatibility forms.
bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

const icu::Normalizer2& normalizer(bool nfd) {
  static const icu::Normalizer2* instances[2] = {nullptr, nullptr};
  static std::once_flag once;
  std::call_once(once, [] {
    UErrorCode status = U_ZERO_ERROR;
    instances[0] = icu::Normalizer2::getNFCInstance(status);
    MF_CHECK(U_SUCCESS(status) && instances[0], "ICU: no NFC normalizer (", u_errorName(status), ")");
    instances[1] = icu::Normalizer2::getNFDInstance(status);
    MF_CHECK(U_SUCCESS(status) && instances[1], "ICU: no NFD normalizer (", u_errorName(status), ")");
  });
  return *instances[nfd ? 1 : 0];
}

icu::UnicodeString to_icu(const std::u32string& s) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()), static_cast<int32_t>(s.size()));
}

std::u32string from_icu(const icu::UnicodeString& u) {
  std::u32string out(static_cast<size_t>(u.countChar32()), U'\0');
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = u.toUTF32(reinterpret_cast<UChar32*>(out.data()), static_cast<int32_t>(out.size()), status);
  MF_CHECK(U_SUCCESS(status), "ICU: UTF-32 conversion failed (", u_errorName(status), ")");
  out.resize(static_cast<size_t>(n));
  return out;
}

std::u32string normalize(const std::u32string& s, bool nfd) {
  bool ascii = true;
  for (char32_t c : s) ascii = ascii && c < 0x80;
  if (ascii) return s;
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeString out = normalizer(nfd).normalize(to_icu(s), status);
  MF_CHECK(U_SUCCESS(status), "ICU: normalisation failed (", u_errorName(status), ")");
  return from_icu(out);
}

// Python's str.lower() (full case mapping, final sigma), then NFD without the Mn marks.
std::u32string lower_strip_accents(const std::u32string& word) {
  bool ascii = true;
  for (char32_t c : word) ascii = ascii && c < 0x80;
  if (ascii) {
    std::u32string out = word;
    for (char32_t& c : out)
      if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    return out;
  }
  icu::UnicodeString u = to_icu(word);
  u.toLower(icu::Locale::getRoot());
  std::u32string nfd = normalize(from_icu(u), /*nfd=*/true);
  std::u32string out;
  out.reserve(nfd.size());
  for (char32_t c : nfd)
    if (u_charType(static_cast<UChar32>(c)) != U_NON_SPACING_MARK) out.push_back(c);
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& path, bool lower_case,
                                                 const std::string& eod_token) {
  check_regular_file(path, "WordPiece vocabulary", kMaxTokenizerFileBytes);
  std::ifstream in(path, std::ios::binary);
  MF_CHECK(in, "WordPiece vocabulary ", path, ": cannot open");
  WordPieceTokenizer tok;
  tok.lower_case_ = lower_case;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    MF_CHECK(tok.tokens_.size() < static_cast<size_t>(INT32_MAX), "WordPiece vocabulary ", path, ": too many lines");
    // As Hugging Face's load_vocab: a token seen twice maps to its last line.
    tok.ids_[line] = static_cast<int32_t>(tok.tokens_.size());
    tok.tokens_.push_back(std::move(line));
  }
  MF_CHECK(!tok.tokens_.empty(), "WordPiece vocabulary ", path, ": empty (expected a BERT vocab.txt, one token a line)");
  tok.unk_id_ = tok.token_id("[UNK]");
  MF_CHECK(tok.unk_id_ >= 0, "WordPiece vocabulary ", path, ": no [UNK] token (not a BERT vocab.txt?)");
  const std::string eod = eod_token.empty() ? "[SEP]" : eod_token;
  tok.eod_id_ = tok.token_id(eod);
  MF_CHECK(tok.eod_id_ >= 0, "WordPiece vocabulary ", path, ": the end-of-document token '", eod, "'",
           eod_token.empty() ? "" : " (tokenization.eod_token)", " is not in it");
  for (const char* s : {"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"})
    if (int32_t id = tok.token_id(s); id >= 0) tok.specials_.emplace_back(s, id);
  return tok;
}

int32_t WordPieceTokenizer::token_id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::u32string> WordPieceTokenizer::basic_words(std::string_view text) const {
  // Clean text and put spaces around CJK ideographs.
  std::u32string clean;
  clean.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    char32_t c = unicode::decode_utf8(text, i, len);
    i += len;
    if (c == unicode::kInvalid || c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(U' ');
    } else if (is_cjk(c)) {
      clean.push_back(U' ');
      clean.push_back(c);
      clean.push_back(U' ');
    } else {
      clean.push_back(c);
    }
  }
  clean = normalize(clean, /*nfd=*/false);
  std::vector<std::u32string> words;
  auto split_punct = [&](const std::u32string& w) {
    std::u32string cur;
    for (char32_t c : w) {
      if (is_punctuation(c)) {
        if (!cur.empty()) words.push_back(std::move(cur));
        cur.clear();
        words.emplace_back(1, c);
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) words.push_back(std::move(cur));
  };
  std::u32string word;
  auto flush = [&] {
    if (word.empty()) return;
    split_punct(lower_case_ ? lower_strip_accents(word) : word);
    word.clear();
  };
  for (char32_t c : clean) {
    if (is_whitespace(c))
      flush();
    else
      word.push_back(c);
  }
  flush();
  // Lower-casing and accent stripping make no white space; a word that was all combining marks
  // is gone (split_punct pushes no empty word).
  return words;
}

void WordPieceTokenizer::wordpiece(const std::u32string& word, std::vector<int32_t>& ids) const {
  if (word.size() > static_cast<size_t>(kMaxWordChars)) {
    ids.push_back(unk_id_);
    return;
  }
  std::string utf8;
  std::vector<size_t> offset{0};  // byte offset of each character, and the end
  for (char32_t c : word) {
    append_utf8(c, utf8);
    offset.push_back(utf8.size());
  }
  size_t first = ids.size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    int32_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(utf8, offset[start], offset[end] - offset[start]);
      if (int32_t id = token_id(piece); id >= 0) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ids.resize(first);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(found);
    start = end;
  }
}

void WordPieceTokenizer::encode_segment(std::string_view text, std::vector<int32_t>& ids) const {
  for (const std::u32string& w : basic_words(text)) wordpiece(w, ids);
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t done = 0;
  for (size_t i = text.find('['); i != std::string_view::npos; i = text.find('[', i)) {
    int32_t special = -1;
    size_t len = 0;
    for (const auto& [s, id] : specials_)
      if (text.substr(i, s.size()) == s) {
        special = id;
        len = s.size();
        break;
      }
    if (special < 0) {
      ++i;
      continue;
    }
    encode_segment(text.substr(done, i - done), ids);
    ids.push_back(special);
    i += len;
    done = i;
  }
  encode_segment(text.substr(done), ids);
  return ids;
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(std::string_view text) const {
  std::vector<std::string> out;
  size_t done = 0;
  auto segment = [&](std::string_view s) {
    for (const std::u32string& w : basic_words(s)) out.push_back(to_utf8(w));
  };
  for (size_t i = text.find('['); i != std::string_view::npos; i = text.find('[', i)) {
    const std::string* match = nullptr;
    for (const auto& sp : specials_)
      if (text.substr(i, sp.first.size()) == sp.first) match = &sp.first;
    if (!match) {
      ++i;
      continue;
    }
    segment(text.substr(done, i - done));
    out.push_back(*match);
    i += match->size();
    done = i;
  }
  segment(text.substr(done));
  return out;
}

std::string WordPieceTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    int32_t id = ids[k];
    MF_CHECK(id >= 0 && id < static_cast<int32_t>(tokens_.size()), "WordPieceTokenizer::decode: id ", id,
             " outside [0, ", tokens_.size(), ")");
    const std::string& t = tokens_[static_cast<size_t>(id)];
    if (k > 0 && t.size() >= 2 && t.compare(0, 2, "##") == 0) {
      out.append(t, 2);
    } else {
      if (k > 0) out.push_back(' ');
      out.append(t);
    }
  }
  return out;
}

std::optional<int32_t> WordPieceTokenizer::token_to_id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

std::string WordPieceTokenizer::id_to_token(int32_t id) const {
  MF_CHECK(id >= 0 && id < static_cast<int32_t>(tokens_.size()), "WordPieceTokenizer: id ", id, " outside [0, ",
           tokens_.size(), ")");
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace mf
