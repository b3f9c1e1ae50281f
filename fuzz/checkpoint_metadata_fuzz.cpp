// Checkpoint metadata.json (the whole input is the file's text), and the geometry the reader
// derives from each accepted piece.
#include <cstdint>
#include <string>

#include "meshflow/core/error.h"
#include "meshflow/io/checkpoint_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const mf::io::CheckpointMetadata m = mf::io::parse_checkpoint_metadata(text, "metadata.json");
    for (const auto& [name, t] : m.tensors)
      for (const auto& p : t.pieces) {
        const mf::io::RegionGeometry g = mf::io::region_geometry(p.region);
        if (g.outer * g.seg_len < p.region.numel()) __builtin_trap();
      }
  } catch (const mf::Error&) {
  }
  return 0;
}
