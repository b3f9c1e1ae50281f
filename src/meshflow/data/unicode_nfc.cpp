// NFC through ICU's Normalizer2 on UTF-8 (no conversion to UTF-16).
#include "meshflow/data/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "meshflow/core/error.h"
#include "meshflow/data/unicode.h"

namespace mf::unicode {
namespace {

const icu::Normalizer2& nfc() {
  static const icu::Normalizer2* instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    MF_CHECK(U_SUCCESS(status) && n, "ICU: no NFC normalizer (", u_errorName(status), ")");
    return n;
  }();
  return *instance;
}

// Appends the NFC form of valid UTF-8 `text`.
void append_valid_nfc(std::string_view text, std::string& out) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  UErrorCode status = U_ZERO_ERROR;
  icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (ascii || nfc().isNormalizedUTF8(piece, status)) {
    out.append(text);
    return;
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc().normalizeUTF8(0, piece, sink, nullptr, status);
  MF_CHECK(U_SUCCESS(status), "ICU: NFC normalisation failed (", u_errorName(status), ")");
}

}  // namespace

void append_nfc(std::string_view text, std::string& out) {
  size_t start = 0, i = 0, len;
  while (i < text.size()) {
    if (decode_utf8(text, i, len) != kInvalid) {
      i += len;
      continue;
    }
    append_valid_nfc(text.substr(start, i - start), out);
    out.push_back(text[i]);  // an invalid byte, kept as it is
    start = ++i;
  }
  append_valid_nfc(text.substr(start), out);
}

}  // namespace mf::unicode
