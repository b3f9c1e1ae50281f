// Megatron's .idx index: the input is written as <prefix>.idx and, the same bytes, as <prefix>.bin
// (so sequences point at arbitrary token bytes); every sequence of an accepted index is read.
#include <cstdint>
#include <string_view>

#include "fuzz_input.h"
#include "meshflow/core/error.h"
#include "meshflow/data/indexed_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mf::fuzz::ScratchDir dir;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  dir.write("d.idx", bytes);
  dir.write("d.bin", bytes);
  try {
    mf::IndexedDataset ds(dir.path() + "/d");
    int64_t tokens = 0;
    for (int64_t i = 0; i < ds.num_sequences(); ++i) tokens += static_cast<int64_t>(ds.sequence(i).size());
    if (tokens != ds.num_tokens()) __builtin_trap();
  } catch (const mf::Error&) {
  }
  return 0;
}
