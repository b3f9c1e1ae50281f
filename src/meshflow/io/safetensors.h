// The safetensors format (Hugging Face): 8-byte little-endian header size N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {str: str}}, then the
// raw little-endian data. Used for checkpoints and for model import/export.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "meshflow/io/safetensors_header.h"
#include "meshflow/nn/module.h"

namespace mf::io {

// Writes tensors (in the given order) atomically; metadata strings go to "__metadata__".
void save_safetensors(const std::string& path, const nn::NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  nn::NamedTensors tensors;  // in file order of their data
  std::map<std::string, std::string> metadata;
};
// Reads and validates a file (parse_safetensors_header: header bounds, dtypes, offsets inside
// the data section, no overlaps); errors name the file.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace mf::io
