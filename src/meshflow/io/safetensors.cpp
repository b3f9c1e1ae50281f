#include "meshflow/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/ops/ops.h"

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

void save_safetensors(const std::string& path, const nn::NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<Tensor> data;
  for (const auto& [name, t] : tensors) {
    MF_CHECK(t.device().type == DeviceType::kCPU, "save_safetensors: ", name, " is on ", t.device().str());
    Tensor c = contiguous(t.detach());
    header[name] = {{"dtype", safetensors_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + c.nbytes()}}};
    offset += c.nbytes();
    data.push_back(c);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  uint64_t hlen = h.size();
  AtomicFile f(path);
  f.write(&hlen, 8);  // little-endian host
  f.write(h);
  for (const auto& c : data) f.write(c.raw_data(), c.nbytes());
  f.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::string bytes = read_file(path);
  MF_CHECK(bytes.size() >= 8, path, ": truncated safetensors file (", bytes.size(), " bytes)");
  uint64_t hlen;
  std::memcpy(&hlen, bytes.data(), 8);
  MF_CHECK(hlen <= bytes.size() - 8, path, ": header size ", hlen, " exceeds the file (", bytes.size(), " bytes)");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(hlen));
  } catch (const std::exception& e) {
    MF_THROW(path, ": corrupt safetensors header: ", e.what());
  }
  MF_CHECK(header.is_object(), path, ": safetensors header is not a JSON object");
  const uint64_t data_start = 8 + hlen, data_size = bytes.size() - data_start;
  SafetensorsFile out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<std::tuple<uint64_t, std::string, Tensor>> ordered;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, v] : entry.items()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    try {
      DType dt = dtype_from_safetensors(entry.at("dtype").get<std::string>(), path);
      Shape shape = entry.at("shape").get<Shape>();
      auto off = entry.at("data_offsets").get<std::vector<uint64_t>>();
      MF_CHECK(off.size() == 2 && off[0] <= off[1] && off[1] <= data_size, path, ": tensor '", name,
               "' has data_offsets outside the data section (", data_size, " bytes)");
      MF_CHECK(off[1] - off[0] == static_cast<uint64_t>(shape_numel(shape)) * dtype_nbytes(dt), path, ": tensor '",
               name, "' has ", off[1] - off[0], " bytes for shape ", shape_str(shape), " ", dtype_name(dt));
      Tensor t = empty(shape, dt);
      std::memcpy(t.raw_data(), bytes.data() + data_start + off[0], off[1] - off[0]);
      ranges.emplace_back(off[0], off[1]);
      ordered.emplace_back(off[0], name, t);
    } catch (const nlohmann::json::exception& e) {
      MF_THROW(path, ": malformed entry for tensor '", name, "': ", e.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    MF_CHECK(ranges[i].first >= ranges[i - 1].second, path, ": overlapping tensor data");
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  for (auto& [o, name, t] : ordered) out.tensors.emplace_back(name, t);
  return out;
}

}  // namespace mf::io
