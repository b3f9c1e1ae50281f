// The text of generated tokens as it grows, for streaming: push() returns the text the new token
// completes. A character whose UTF-8 bytes are spread over several tokens (byte-level BPE) waits
// for its last byte; the whole is decoded again each time, so a tokenizer that joins pieces
// differently at the start (SentencePiece's leading space) streams the same text as one decode.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/data/tokenizer.h"

namespace mf::infer {

// The length of the longest prefix of `s` that does not end inside a UTF-8 character.
size_t complete_utf8_prefix(const std::string& s);

class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tok_(&tokenizer) {}
  // The new text `token` completes (possibly empty).
  std::string push(int64_t token);
  // What is left at the end (a character left incomplete included).
  std::string flush();
  // Everything decoded so far.
  std::string text() const;

 private:
  const Tokenizer* tok_;
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;  // bytes of the decoded text already returned
};

}  // namespace mf::infer
