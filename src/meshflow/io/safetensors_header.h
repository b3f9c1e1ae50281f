// The header of a safetensors file, parsed and checked without reading any tensor data: what
// load_safetensors() trusts, apart so that it can be tested (and fuzzed, fuzz/) on bytes alone.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/core/dtype.h"
#include "meshflow/core/shape.h"

namespace mf::io {

const char* safetensors_dtype(DType dt);   // "F32", "BF16", ...
DType dtype_from_safetensors(const std::string& s, const std::string& file);

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // [begin, end) in the data section
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                // 8 + header size: where the data section begins
  std::vector<SafetensorsEntry> tensors;  // in file order of their data
  std::map<std::string, std::string> metadata;
};

// Parses the first bytes of a safetensors file (`bytes`: the whole file, or at least its 8-byte
// size and its header; `file_size`: the whole file's size) and checks the header bounds, the
// JSON, each entry's dtype, shape (non-negative sizes whose byte count fits 64 bits), offsets
// inside the data section matching the byte count, no overlaps, string metadata. Throws mf::Error
// naming `file`.
SafetensorsHeader parse_safetensors_header(std::string_view bytes, uint64_t file_size, const std::string& file);

}  // namespace mf::io
