// Unicode Normalization Form C (canonical composition), the normalizer of Qwen2's tokenizer.json,
// through ICU. Bytes that are not valid UTF-8 pass through unchanged, and the valid text between
// them is normalised piece by piece.
#pragma once
#include <string>
#include <string_view>

namespace mf::unicode {

// Appends the NFC form of `text` to `out`.
void append_nfc(std::string_view text, std::string& out);

}  // namespace mf::unicode
