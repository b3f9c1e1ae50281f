// Hugging Face tokenizer.json (byte-level BPE): the input is the file, a NUL byte, a text. An
// accepted tokenizer encodes the text and decodes the ids.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "meshflow/core/error.h"
#include "meshflow/data/hf_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mf::fuzz::ScratchDir dir;
  const std::vector<std::string> parts = mf::fuzz::split_parts(data, size, 2);
  const std::string path = dir.write("tokenizer.json", parts[0]);
  try {
    const mf::HfBpeTokenizer tok = mf::HfBpeTokenizer::from_file(path);
    const std::vector<int32_t> ids = tok.encode(parts[1]);
    (void)tok.decode(ids);
    for (int32_t id : ids) (void)tok.id_to_token(id);
  } catch (const mf::Error&) {
  }
  return 0;
}
