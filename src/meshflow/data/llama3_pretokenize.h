// The pre-tokeniser of Llama 3 and Qwen2 (their tokenizer.json's Split pre-tokenizer), written out
// by hand over UTF-8 code points like gpt2_pretokenize.h. It splits text exactly as
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// does (leftmost alternative first, greedy, with backtracking), Llama 3's pattern; Qwen2's is the
// same with \p{N} (one number per piece) for \p{N}{1,3}. Character classes come from unicode.h;
// the contractions' case-insensitivity covers ASCII letters, as the JavaScript reference encoders
// do. Bytes that are not valid UTF-8 count as punctuation, so every byte string splits into
// pieces that concatenate back to it.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace mf {

inline constexpr std::string_view kLlama3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
inline constexpr std::string_view kQwen2SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The longest run of numbers one piece takes under `regex` (3: Llama 3, 1: Qwen2), or nothing
// when the regex is neither of the two.
std::optional<int> llama3_pattern_number_run(std::string_view regex);

// Clears `pieces` and fills it with consecutive views into `text`; `max_number_run` is 3 or 1.
void llama3_pretokenize(std::string_view text, int max_number_run, std::vector<std::string_view>& pieces);

}  // namespace mf
