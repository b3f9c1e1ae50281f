// Sentence splitting for `meshflow preprocess --split-sentences` (Megatron's
// tools/preprocess_data.py --split-sentences, which uses NLTK's punkt): a rule-based splitter in
// punkt's spirit, with no trained model.
//   A sentence ends after a run of '.', '!', '?' (".", "?!", "...") and any closing quotes or
//   brackets after it (" ' ) ] } ” ’ »), when white space follows and then an upper-case letter,
//   a digit, an opening quote or bracket (" ' ( [ { “ ‘ «) or the end of the text. A single '.'
//   does not end a sentence after a common abbreviation (Mr. Dr. etc. e.g. Inc. No. Fig. ...,
//   case-insensitive), a single-letter initial ("J. R. R. Tolkien"), or a dotted acronym
//   ("U.S.", "Ph.D."); a '.' inside a number ("3.14") is never followed by white space.
//   A blank line (a line of white space only) also ends a sentence.
// Each sentence is trimmed of white space; empty pieces are dropped.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mf {

std::vector<std::string> split_sentences(std::string_view text);

}  // namespace mf
