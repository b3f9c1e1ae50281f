// Placement: validation, the intern table and the rank <-> mesh coordinate maps (row-major).
#include "meshflow/global/placement.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "meshflow/core/error.h"
#include "meshflow/core/shape.h"

namespace mf::global {

namespace {

std::string ranks_str(const std::vector<int>& ranks) {
  std::string r = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(ranks[i]);
  }
  return r + "]";
}

}  // namespace

std::optional<std::vector<int64_t>> Placement::coordinate_of(int world_rank) const {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] != world_rank) continue;
    std::vector<int64_t> coord(mesh_shape_.size());
    auto flat = static_cast<int64_t>(i);
    for (size_t d = mesh_shape_.size(); d-- > 0;) {
      coord[d] = flat % mesh_shape_[d];
      flat /= mesh_shape_[d];
    }
    return coord;
  }
  return std::nullopt;
}

int Placement::rank_at(const std::vector<int64_t>& coord) const {
  MF_CHECK(coord.size() == mesh_shape_.size(), "rank_at: coordinate of ", coord.size(), " entries on ", str());
  int64_t flat = 0;
  for (size_t d = 0; d < mesh_shape_.size(); ++d) {
    MF_CHECK(coord[d] >= 0 && coord[d] < mesh_shape_[d], "rank_at: coordinate ", coord[d], " out of range for mesh axis ",
             d, " of size ", mesh_shape_[d], " on ", str());
    flat = flat * mesh_shape_[d] + coord[d];
  }
  return ranks_[static_cast<size_t>(flat)];
}

std::string Placement::str() const {
  return std::string(device_type_ == DeviceType::kCPU ? "cpu" : "cuda") + ":" + ranks_str(ranks_) + " as " +
         shape_str(mesh_shape_);
}

const Placement* placement(DeviceType device_type, const std::vector<int64_t>& mesh_shape,
                           const std::vector<int>& ranks) {
  MF_CHECK(!mesh_shape.empty(), "placement: the mesh needs at least one axis (ranks ", ranks_str(ranks), ")");
  int64_t product = 1;
  for (int64_t s : mesh_shape) {
    MF_CHECK(s >= 1, "placement: mesh ", shape_str(mesh_shape), " has an axis of size ", s);
    product *= s;
  }
  MF_CHECK(product == static_cast<int64_t>(ranks.size()), "placement: mesh ", shape_str(mesh_shape), " holds ", product,
           " ranks but ", ranks.size(), " were given: ", ranks_str(ranks));
  std::set<int> seen;
  for (int r : ranks)
    MF_CHECK(r >= 0 && seen.insert(r).second, "placement: rank ", r, " is negative or repeated in ", ranks_str(ranks));

  using Key = std::tuple<int, std::vector<int64_t>, std::vector<int>>;
  // Never destroyed, so pointers stay valid during static destruction too.
  static auto* mutex = new std::mutex;
  static auto* table = new std::map<Key, std::unique_ptr<Placement>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto [it, inserted] = table->try_emplace(Key{static_cast<int>(device_type), mesh_shape, ranks});
  if (inserted) it->second.reset(new Placement(device_type, mesh_shape, ranks));
  return it->second.get();
}

}  // namespace mf::global
