// safetensors: the 8-byte header size and the JSON header of a .safetensors file (the whole input
// is the file).
#include <cstdint>
#include <string_view>

#include "meshflow/core/error.h"
#include "meshflow/io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const mf::io::SafetensorsHeader h = mf::io::parse_safetensors_header(bytes, size, "fuzz.safetensors");
    for (const auto& e : h.tensors)  // what load_safetensors then copies: inside the input
      if (h.data_start + e.end > size || e.begin > e.end) __builtin_trap();
  } catch (const mf::Error&) {
  }
  return 0;
}
