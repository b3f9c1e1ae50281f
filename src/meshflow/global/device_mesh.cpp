// DeviceMesh: the mesh placement over the named dimensions and the per-dimension
// sub-communicators made by split(color, key).
#include "meshflow/global/device_mesh.h"

#include <algorithm>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::global {

DeviceType device_type_from_config(const Config& config) {
  const std::string type = config.get_string("train.dist.device_type");
  MF_CHECK(type == "cpu" || type == "cuda", "train.dist.device_type must be cpu or cuda, got '", type, "'");
  return type == "cuda" ? DeviceType::kCUDA : DeviceType::kCPU;
}

DeviceMesh DeviceMesh::from_config(const Config& config, comm::Communicator& world) {
  return DeviceMesh(ParallelDims::from_config(config), world, device_type_from_config(config));
}

DeviceMesh::DeviceMesh(const ParallelDims& dims, comm::Communicator& world, DeviceType device_type)
    : dims_(dims.resolved(world.size())) {
  const char* type_name = device_type == DeviceType::kCPU ? "cpu" : "cuda";
  MF_CHECK(world.accepts(device_type), "device mesh on ", type_name, ": the ", world.backend(),
           " communicator of ", world.group_str(), " cannot carry ", type_name,
           " tensors (a GPU mesh needs the NCCL communicator)");
  // Placement ranks are world ranks, so a mesh over a sub-group still names the right processes.
  // The axis groups are splits of `world`: NCCL ones for a GPU mesh.
  placement_ = ::mf::global::placement(device_type, dims_.sizes(), world.world_ranks());
  auto coord = placement_->coordinate_of(world.world_ranks()[static_cast<size_t>(world.rank())]);
  MF_CHECK(coord.has_value(), "device mesh: rank ", world.rank(), " missing from ", placement_->str());
  coordinate_ = *coord;
  for (size_t d = 0; d < dims_.count(); ++d) {
    comms_.push_back(split_over(world, {dims_.name(d)}));
    MF_CHECK(comms_.back() != nullptr, "device mesh: split for dimension ", dims_.name(d), " returned no communicator");
  }
}

comm::CommPtr DeviceMesh::split_over(comm::Communicator& world, const std::vector<std::string>& dims) const {
  std::vector<bool> along(dims_.count(), false);
  for (const std::string& d : dims) along[dim_index(d)] = true;
  // color = the row-major index of the coordinate without `dims`, key = the index along them.
  int64_t color = 0, key = 0;
  for (size_t d = 0; d < dims_.count(); ++d) {
    int64_t& v = along[d] ? key : color;
    v = v * dims_.size(d) + coordinate_[d];
  }
  return world.split(static_cast<int>(color), static_cast<int>(key));
}

std::vector<comm::Communicator*> DeviceMesh::comms() const {
  std::vector<comm::Communicator*> out;
  for (const comm::CommPtr& c : comms_) out.push_back(c.get());
  return out;
}

const Placement* DeviceMesh::stage_placement(int64_t pp_index) const {
  const size_t pp = dim_index("pp");
  MF_CHECK(pp_index >= 0 && pp_index < dims_.size(pp), "stage_placement: stage ", pp_index, " out of range for ", str());
  std::vector<int64_t> shape;
  for (size_t d = 0; d < dims_.count(); ++d)
    if (d != pp) shape.push_back(dims_.size(d));
  std::vector<int> ranks;
  for (int64_t i = 0; i < dims_.product(); ++i)
    if (dims_.coordinate_of(i)[pp] == pp_index) ranks.push_back(placement_->ranks()[static_cast<size_t>(i)]);
  return ::mf::global::placement(placement_->device_type(), shape, ranks);
}

std::string DeviceMesh::str() const { return detail::cat("mesh (", dims_.str(), ") on ", placement_->str()); }

}  // namespace mf::global
