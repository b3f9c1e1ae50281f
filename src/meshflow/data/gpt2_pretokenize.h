// GPT-2's pre-tokeniser, written out by hand over UTF-8 code points. It splits text exactly as
// the regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does (leftmost alternative first, greedy, with the look-ahead's backtracking). Character
// classes come from unicode.h. Bytes that are not valid UTF-8 count as punctuation, so every
// byte string splits into pieces that concatenate back to it.
#pragma once
#include <string_view>
#include <vector>

namespace mf {

// Clears `pieces` and fills it with consecutive views into `text`.
void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& pieces);

}  // namespace mf
