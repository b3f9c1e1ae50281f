// DeviceMesh: size validation and derivation, the mesh placement, and the per-axis
// sub-communicators made by split(color, key).
#include "meshflow/global/device_mesh.h"

#include <algorithm>

#include "meshflow/config/config.h"
#include "meshflow/core/error.h"

namespace mf::global {

namespace {

std::string sizes_str(const MeshSizes& s) {
  return detail::cat("pipeline_parallel_size=", s.pipeline, ", data_parallel_size=", s.data,
                     ", tensor_parallel_size=", s.tensor);
}

}  // namespace

MeshSizes resolve_mesh_sizes(const MeshSizes& req, int world_size) {
  const std::string what = detail::cat("device mesh: ", sizes_str(req), " (train.dist.*) on a world of ",
                                       world_size, " ranks: ");
  MF_CHECK(req.pipeline >= 0 && req.data >= 0 && req.tensor >= 0, what, "sizes must be >= 1, or 0 to derive one");
  const int zeros = (req.pipeline == 0) + (req.data == 0) + (req.tensor == 0);
  MF_CHECK(zeros <= 1, what, "at most one size may be 0 (derived from the world size)");
  MeshSizes s = req;
  if (zeros == 1) {
    const int64_t others = std::max<int64_t>(req.pipeline, 1) * std::max<int64_t>(req.data, 1) *
                           std::max<int64_t>(req.tensor, 1);
    MF_CHECK(world_size % others == 0, what, "the world size is not divisible by the product ", others,
             " of the given sizes, so the size given as 0 cannot be derived");
    int64_t& derived = req.pipeline == 0 ? s.pipeline : req.data == 0 ? s.data : s.tensor;
    derived = world_size / others;
  }
  const int64_t product = s.pipeline * s.data * s.tensor;
  MF_CHECK(product == world_size, what, "pp x dp x tp = ", s.pipeline, " x ", s.data, " x ", s.tensor, " = ",
           product, " does not equal the world size ", world_size);
  return s;
}

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::kPipeline: return "pp";
    case Axis::kData: return "dp";
    case Axis::kTensor: return "tp";
  }
  return "?";
}

MeshSizes MeshSizes::from_config(const Config& config) {
  MeshSizes s;
  s.pipeline = config.get_int("train.dist.pipeline_parallel_size");
  s.data = config.get_int("train.dist.data_parallel_size");
  s.tensor = config.get_int("train.dist.tensor_parallel_size");
  return s;
}

DeviceType device_type_from_config(const Config& config) {
  const std::string type = config.get_string("train.dist.device_type");
  MF_CHECK(type == "cpu" || type == "cuda", "train.dist.device_type must be cpu or cuda, got '", type, "'");
  return type == "cuda" ? DeviceType::kCUDA : DeviceType::kCPU;
}

DeviceMesh DeviceMesh::from_config(const Config& config, comm::Communicator& world) {
  return DeviceMesh(MeshSizes::from_config(config), world, device_type_from_config(config));
}

DeviceMesh::DeviceMesh(const MeshSizes& sizes, comm::Communicator& world, DeviceType device_type) {
  const MeshSizes s = resolve_mesh_sizes(sizes, world.size());
  const std::vector<int64_t> shape = {s.pipeline, s.data, s.tensor};
  const char* type_name = device_type == DeviceType::kCPU ? "cpu" : "cuda";
  MF_CHECK(world.accepts(device_type), "device mesh on ", type_name, ": the ", world.backend(),
           " communicator of ", world.group_str(), " cannot carry ", type_name,
           " tensors (a GPU mesh needs the NCCL communicator)");
  // Placement ranks are world ranks, so a mesh over a sub-group still names the right processes.
  // The axis groups are splits of `world`: NCCL ones for a GPU mesh.
  placement_ = ::mf::global::placement(device_type, shape, world.world_ranks());
  auto coord = placement_->coordinate_of(world.world_ranks()[static_cast<size_t>(world.rank())]);
  MF_CHECK(coord.has_value(), "device mesh: rank ", world.rank(), " missing from ", placement_->str());
  coordinate_ = *coord;
  // color = the row-major index of the coordinate without `axis`, key = the index along it.
  // Split in the fixed order pp, dp, tp on every rank.
  for (int a = 0; a < kNumAxes; ++a) {
    int64_t color = 0;
    for (int d = 0; d < kNumAxes; ++d)
      if (d != a) color = color * shape[static_cast<size_t>(d)] + coordinate_[static_cast<size_t>(d)];
    comms_[static_cast<size_t>(a)] =
        world.split(static_cast<int>(color), static_cast<int>(coordinate_[static_cast<size_t>(a)]));
    MF_CHECK(comms_[static_cast<size_t>(a)] != nullptr, "device mesh: split for axis ",
             axis_name(static_cast<Axis>(a)), " returned no communicator");
  }
}

const Placement* DeviceMesh::stage_placement(int64_t pp_index) const {
  const int64_t pp = axis_size(Axis::kPipeline), dp = axis_size(Axis::kData), tp = axis_size(Axis::kTensor);
  MF_CHECK(pp_index >= 0 && pp_index < pp, "stage_placement: stage ", pp_index, " out of range for ", str());
  const auto& all = placement_->ranks();
  std::vector<int> ranks(all.begin() + pp_index * dp * tp, all.begin() + (pp_index + 1) * dp * tp);
  return ::mf::global::placement(placement_->device_type(), {dp, tp}, ranks);
}

std::string DeviceMesh::str() const {
  return detail::cat("mesh (pp=", axis_size(Axis::kPipeline), ", dp=", axis_size(Axis::kData),
                     ", tp=", axis_size(Axis::kTensor), ") on ", placement_->str());
}

}  // namespace mf::global
