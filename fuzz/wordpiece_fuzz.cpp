// BERT's WordPiece vocab.txt: the input is the file, a NUL byte, a text (lower-cased or not by the
// input's parity). An accepted vocabulary encodes the text and decodes the ids.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "meshflow/core/error.h"
#include "meshflow/data/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mf::fuzz::ScratchDir dir;
  const std::vector<std::string> parts = mf::fuzz::split_parts(data, size, 2);
  const std::string path = dir.write("vocab.txt", parts[0]);
  try {
    const mf::WordPieceTokenizer tok = mf::WordPieceTokenizer::from_file(path, size % 2 == 0);
    const std::vector<int32_t> ids = tok.encode(parts[1]);
    (void)tok.decode(ids);
  } catch (const mf::Error&) {
  }
  return 0;
}
