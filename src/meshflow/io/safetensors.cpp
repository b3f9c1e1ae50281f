#include "meshflow/io/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/ops/ops.h"

namespace mf::io {

using json = nlohmann::ordered_json;

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
  const std::string bytes = read_file(path);
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), path);
  SafetensorsFile out;
  out.metadata = header.metadata;
  for (const SafetensorsEntry& e : header.tensors) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), bytes.data() + header.data_start + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace mf::io
