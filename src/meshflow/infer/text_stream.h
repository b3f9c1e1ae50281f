// A generated row's text, token by token: the pieces of text that are final as each token
// arrives, for streaming.
//
// Tokens decode incrementally: all the row's tokens so far are decoded and the new suffix is
// given out only once it is complete UTF-8 (byte-level BPE can split a character over tokens).
// Stop strings: the text is cut before the first stop string and the row ends; a tail of the
// text that could begin a stop string is held back until the next tokens decide. A stop token
// (the end-of-document token) ends the row too, without adding its text. A token the tokenizer
// lacks (in_vocabulary) adds no text and does not end the row.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "meshflow/data/tokenizer.h"

namespace mf::infer {

// Length of the longest prefix of `s` that does not end inside a UTF-8 character still waiting
// for continuation bytes (invalid bytes count as complete: no later byte will mend them).
size_t complete_utf8_prefix(const std::string& s);

// Whether `id` is one of the tokenizer's ids. A model's vocabulary can be larger than its
// tokenizer's (padded for speed); the ids past the tokenizer's have no text.
bool in_vocabulary(const Tokenizer& tok, int64_t id);
// The text of `ids`, those the tokenizer lacks left out (Hugging Face's decode skips them too).
std::string decode_known(const Tokenizer& tok, std::span<const int64_t> ids);

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings, std::vector<int64_t> stop_tokens);

  // Adds the row's next token; returns the text that became final (often empty). Afterwards
  // stopped() says whether the row ended (a stop string or a stop token): the caller then asks
  // for no more tokens. Not to be called once stopped.
  std::string push(int64_t token);
  // The row ended without a stop (its length): the text held back, incomplete UTF-8 included.
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& text() const { return emitted_; }  // everything given out so far
  int64_t tokens() const { return tokens_; }            // tokens pushed, a stop token included

 private:
  // Gives out the part of decoded_ past emitted_ that is final; `last`: no token follows.
  std::string advance(bool last);

  const Tokenizer& tok_;
  std::vector<std::string> stops_;
  std::vector<int64_t> stop_tokens_;
  std::vector<int32_t> ids_;  // the row's tokens, stop tokens left out
  size_t prefix_ = 0;         // ids_[prefix_, read_): read tokens decoded again as context
  size_t read_ = 0;           // ids_[0, read_) are in decoded_
  std::string decoded_;       // the text of ids_[0, read_)
  std::string emitted_;
  int64_t tokens_ = 0;
  bool stopped_ = false;
};

}  // namespace mf::infer
