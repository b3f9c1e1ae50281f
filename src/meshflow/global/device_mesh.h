// DeviceMesh: the training mesh (pp, dp, tp) over the world communicator — pipeline stages
// outermost, tensor-parallel ranks innermost (neighbouring ranks, so TP traffic stays on the
// fastest links). It knows this rank's coordinate and holds one sub-communicator per mesh axis:
// comm(Axis::kTensor) is the group of ranks that differ only in their tp index, ordered by it.
//
// Construction validates the sizes before any collective is issued, then calls split(color,
// key) on the world communicator three times, in the fixed order pp, dp, tp, so every rank must
// construct the same mesh at the same point (the usual collective ordering rule).
// It depends only on the comm::Communicator interface, not on a backend.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/placement.h"

namespace mf {
class Config;
}

namespace mf::global {

enum class Axis : uint8_t { kPipeline = 0, kData = 1, kTensor = 2 };
inline constexpr int kNumAxes = 3;
const char* axis_name(Axis axis);  // "pp", "dp", "tp"

// The requested sizes. A size of 0 is derived from the world size, as LiBai derives data
// parallelism: world / (product of the other two). At most one size may be 0.
struct MeshSizes {
  int64_t pipeline = 1;
  int64_t data = 1;
  int64_t tensor = 1;
  // train.dist.{pipeline,data,tensor}_parallel_size.
  static MeshSizes from_config(const Config& config);
};

// train.dist.device_type (cpu | cuda), the one place it is parsed; throws naming the key.
DeviceType device_type_from_config(const Config& config);

// The sizes with a 0 resolved, checked against the world size: pure arithmetic, identical on every
// rank. Throws mf::Error naming all three sizes and the world size.
MeshSizes resolve_mesh_sizes(const MeshSizes& requested, int world_size);

class DeviceMesh {
 public:
  // Collective over `world` (see above). Throws mf::Error naming all three sizes and the world
  // size when they do not multiply to the world size — before any communication.
  // `device_type`: where the ranks' tensors live (the placement's device type); `world` must
  // accept tensors there (a GPU mesh needs the NCCL communicator, whose splits are NCCL too).
  DeviceMesh(const MeshSizes& sizes, comm::Communicator& world, DeviceType device_type = DeviceType::kCPU);
  // Sizes from train.dist.*_parallel_size, the device type from train.dist.device_type.
  static DeviceMesh from_config(const Config& config, comm::Communicator& world);

  // The full mesh (pp, dp, tp) of world ranks.
  const Placement* placement() const { return placement_; }
  // This rank's (pp, dp, tp) coordinate.
  const std::vector<int64_t>& coordinate() const { return coordinate_; }
  int64_t index(Axis axis) const { return coordinate_[static_cast<size_t>(axis)]; }
  int64_t axis_size(Axis axis) const { return placement_->mesh_size(static_cast<int>(axis)); }
  // The ranks that differ from this one only along `axis`; its rank() equals index(axis).
  comm::Communicator& comm(Axis axis) const { return *comms_[static_cast<size_t>(axis)]; }
  const comm::CommPtr& comm_ptr(Axis axis) const { return comms_[static_cast<size_t>(axis)]; }
  // The (dp, tp) sub-placement of pipeline stage `pp_index`.
  const Placement* stage_placement(int64_t pp_index) const;

  std::string str() const;  // "mesh (pp=1, dp=2, tp=2) on cpu:[0,1,2,3] as (1, 2, 2)"

 private:
  const Placement* placement_ = nullptr;
  std::vector<int64_t> coordinate_;
  std::array<comm::CommPtr, kNumAxes> comms_;
};

}  // namespace mf::global
