#include "meshflow/io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"

namespace mf::io {

using json = nlohmann::ordered_json;

const char* safetensors_dtype(DType dt) {
  switch (dt) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

DType dtype_from_safetensors(const std::string& s, const std::string& file) {
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kBool})
    if (s == safetensors_dtype(dt)) return dt;
  MF_THROW(file, ": unsupported safetensors dtype '", s, "'");
}

namespace {

// A JSON array of non-negative integers (JSON floats and negatives refused: converting them
// would be undefined or wrap).
std::vector<uint64_t> uint_array(const json& j, const std::string& what) {
  MF_CHECK(j.is_array(), what, " is not an array");
  std::vector<uint64_t> out;
  for (const json& v : j) {
    MF_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), what,
             " holds ", v.dump(), ", not a non-negative integer");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view bytes, uint64_t file_size, const std::string& path) {
  MF_CHECK(bytes.size() >= 8 && file_size >= 8, path, ": truncated safetensors file (", file_size, " bytes)");
  uint64_t hlen;
  std::memcpy(&hlen, bytes.data(), 8);
  MF_CHECK(hlen <= file_size - 8, path, ": header size ", hlen, " exceeds the file (", file_size, " bytes)");
  MF_CHECK(hlen <= bytes.size() - 8, path, ": header size ", hlen, " exceeds the ", bytes.size() - 8, " bytes read");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(hlen));
  } catch (const std::exception& e) {
    MF_THROW(path, ": corrupt safetensors header: ", e.what());
  }
  MF_CHECK(header.is_object(), path, ": safetensors header is not a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + hlen;
  const uint64_t data_size = file_size - out.data_start;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      MF_CHECK(entry.is_object(), path, ": __metadata__ is not an object of strings");
      for (auto& [k, v] : entry.items()) {
        MF_CHECK(v.is_string(), path, ": __metadata__ '", k, "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string what = path + ": tensor '" + name + "'";
    MF_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets"),
             what, ": malformed entry (expected an object with dtype, shape and data_offsets)");
    MF_CHECK(entry["dtype"].is_string(), what, ": dtype is not a string");
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dtype_from_safetensors(entry["dtype"].get<std::string>(), path);
    uint64_t nbytes = dtype_nbytes(e.dtype);
    for (uint64_t d : uint_array(entry["shape"], what + ": shape")) {
      // Sizes whose byte count does not fit 63 bits cannot be in a file.
      MF_CHECK(d <= static_cast<uint64_t>(INT64_MAX) && (d == 0 || nbytes <= static_cast<uint64_t>(INT64_MAX) / d),
               what, ": shape ", entry["shape"].dump(), " is too large");
      nbytes *= d;
      e.shape.push_back(static_cast<int64_t>(d));
    }
    const std::vector<uint64_t> off = uint_array(entry["data_offsets"], what + ": data_offsets");
    MF_CHECK(off.size() == 2 && off[0] <= off[1] && off[1] <= data_size, what,
             " has data_offsets outside the data section (", data_size, " bytes)");
    MF_CHECK(off[1] - off[0] == nbytes, what, " has ", off[1] - off[0], " bytes for shape ", shape_str(e.shape), " ",
             dtype_name(e.dtype));
    e.begin = off[0];
    e.end = off[1];
    out.tensors.push_back(std::move(e));
  }
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < out.tensors.size(); ++i)
    MF_CHECK(out.tensors[i].begin >= out.tensors[i - 1].end, path, ": overlapping tensor data");
  return out;
}

}  // namespace mf::io
