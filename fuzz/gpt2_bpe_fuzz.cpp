// GPT-2 vocabulary files: the input is encoder.json, a NUL byte, vocab.bpe, a NUL byte, a text.
// An accepted vocabulary encodes the text, and decoding gives the text back.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mf::fuzz::ScratchDir dir;
  const std::vector<std::string> parts = mf::fuzz::split_parts(data, size, 3);
  const std::string vocab = dir.write("encoder.json", parts[0]), merges = dir.write("vocab.bpe", parts[1]);
  try {
    mf::Gpt2BpeTokenizer tok(vocab, merges);
    const std::vector<int32_t> ids = tok.encode(parts[2]);
    if (tok.decode(ids) != parts[2]) __builtin_trap();
    for (int32_t id : ids) (void)tok.id_to_token(id);
  } catch (const mf::Error&) {
  }
  return 0;
}
