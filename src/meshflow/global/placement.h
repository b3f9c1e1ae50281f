// Placement: the ranks a global tensor lives on, arranged as a mesh — a device type, a mesh
// shape such as (2, 2), and the world ranks in row-major mesh order. Interned like NdSbp:
// placement(...) returns one canonical pointer per distinct value, so equality is a pointer
// compare. Printed "cpu:[0,1,2,3] as (2, 2)".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshflow/core/device.h"

namespace mf::global {

class Placement {
 public:
  DeviceType device_type() const { return device_type_; }
  const std::vector<int64_t>& mesh_shape() const { return mesh_shape_; }
  int ndim() const { return static_cast<int>(mesh_shape_.size()); }
  int64_t mesh_size(int mesh_axis) const { return mesh_shape_.at(static_cast<size_t>(mesh_axis)); }
  // World ranks in row-major mesh order; size() of them.
  const std::vector<int>& ranks() const { return ranks_; }
  int size() const { return static_cast<int>(ranks_.size()); }

  bool contains(int world_rank) const { return coordinate_of(world_rank).has_value(); }
  // The mesh coordinate of `world_rank`, or nullopt when it is not a member.
  std::optional<std::vector<int64_t>> coordinate_of(int world_rank) const;
  // The world rank at mesh coordinate `coord` (one index per mesh axis); throws when out of range.
  int rank_at(const std::vector<int64_t>& coord) const;

  std::string str() const;  // "cpu:[0,1,2,3] as (2, 2)"
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

 private:
  friend const Placement* placement(DeviceType, const std::vector<int64_t>&, const std::vector<int>&);
  Placement(DeviceType device_type, std::vector<int64_t> mesh_shape, std::vector<int> ranks)
      : device_type_(device_type), mesh_shape_(std::move(mesh_shape)), ranks_(std::move(ranks)) {}
  DeviceType device_type_;
  std::vector<int64_t> mesh_shape_;
  std::vector<int> ranks_;
};

// The canonical placement. Throws unless the mesh has at least one axis, every axis is >= 1,
// the product of the axes equals the number of ranks, and the ranks are distinct and >= 0.
// Thread-safe; the pointer lives until the process ends.
const Placement* placement(DeviceType device_type, const std::vector<int64_t>& mesh_shape,
                           const std::vector<int>& ranks);
// A 1-D placement of `ranks`.
inline const Placement* placement(DeviceType device_type, const std::vector<int>& ranks) {
  return placement(device_type, {static_cast<int64_t>(ranks.size())}, ranks);
}

}  // namespace mf::global
