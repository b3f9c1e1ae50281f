// DeviceMesh: the training mesh over the world communicator, one axis per named parallel
// dimension (parallel_dims.h, outermost first: pipeline stages outermost, tensor-parallel ranks
// innermost). It knows this rank's coordinate and holds one sub-communicator per dimension:
// comm("tp") is the group of ranks that differ only in their tp index, ordered by it;
// split_over() makes the group of several dimensions (the ranks of a pipeline stage, ...).
//
// Construction validates the sizes before any collective is issued, then calls split(color,
// key) on the world communicator once per dimension, in the order of the dimensions, so every
// rank must construct the same mesh at the same point (the usual collective ordering rule).
// It depends only on the comm::Communicator interface, not on a backend.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/parallel_dims.h"
#include "meshflow/global/placement.h"

namespace mf {
class Config;
}

namespace mf::global {

// train.dist.device_type (cpu | cuda), the one place it is parsed; throws naming the key.
DeviceType device_type_from_config(const Config& config);

class DeviceMesh {
 public:
  // Collective over `world` (see above). Throws mf::Error naming every size and the world size
  // when they do not multiply to the world size (a size 0 is derived) — before any communication.
  // `device_type`: where the ranks' tensors live (the placement's device type); `world` must
  // accept tensors there (a GPU mesh needs the NCCL communicator, whose splits are NCCL too).
  DeviceMesh(const ParallelDims& dims, comm::Communicator& world, DeviceType device_type = DeviceType::kCPU);
  // Sizes from train.dist.*_parallel_size, the device type from train.dist.device_type.
  static DeviceMesh from_config(const Config& config, comm::Communicator& world);

  const ParallelDims& dims() const { return dims_; }  // resolved
  // The full mesh of world ranks, one axis per dimension.
  const Placement* placement() const { return placement_; }
  // This rank's coordinate: one index per dimension.
  const std::vector<int64_t>& coordinate() const { return coordinate_; }
  int64_t index(std::string_view dim) const { return coordinate_[dim_index(dim)]; }
  int64_t size(std::string_view dim) const { return dims_.size(dim); }
  // The ranks that differ from this one only along `dim`; its rank() equals index(dim).
  comm::Communicator& comm(std::string_view dim) const { return *comms_[dim_index(dim)]; }
  const comm::CommPtr& comm_ptr(std::string_view dim) const { return comms_[dim_index(dim)]; }
  // One communicator per dimension, in order: the axis communicators of placement()'s tensors.
  std::vector<comm::Communicator*> comms() const;
  // Collective over `world` (the mesh's): the ranks that differ from this one only along `dims`,
  // ordered row-major by their indices along them.
  comm::CommPtr split_over(comm::Communicator& world, const std::vector<std::string>& dims) const;
  // The sub-placement of pipeline stage `pp_index`: every dimension but pp.
  const Placement* stage_placement(int64_t pp_index) const;

  std::string str() const;  // "mesh (pp=1, dp=2, tp=2) on cpu:[0,1,2,3] as (1, 2, 2)"

 private:
  ParallelDims dims_;
  const Placement* placement_ = nullptr;
  std::vector<int64_t> coordinate_;
  std::vector<comm::CommPtr> comms_;
};

}  // namespace mf::global
