#include "meshflow/layers/place.h"

#include "meshflow/core/error.h"

namespace mf::layers {

Place::Place(const nn::TensorParallel& split) : split_(split) {
  std::vector<int> ranks{0};
  if (split.comm) {
    ranks = split.comm->world_ranks();
    world_rank_ = ranks.at(static_cast<size_t>(split.comm->rank()));
  }
  cpu_ = global::placement(DeviceType::kCPU, ranks);
  cuda_ = global::placement(DeviceType::kCUDA, ranks);
  if (split.size() > 1) {
    cpu_binding_ = std::make_shared<global::PlacementBinding>(cpu_, std::vector<comm::Communicator*>{split.comm.get()},
                                                              world_rank_);
    cuda_binding_ = std::make_shared<global::PlacementBinding>(cuda_, std::vector<comm::Communicator*>{split.comm.get()},
                                                               world_rank_);
  }
}

Place Place::shape_only(int size) {
  MF_CHECK(size >= 1 || size == kAnyRanks, "layers: a shape-only Place of ", size, " ranks");
  Place p;
  p.held_ = false;
  p.nominal_size_ = size;
  return p;
}

Place Place::elsewhere() const {
  Place p = *this;
  p.held_ = false;
  return p;
}

const global::Placement* Place::placement(Device device) const {
  if (!cpu_) {  // default-constructed: one rank
    static const global::Placement* one_cpu = global::placement(DeviceType::kCPU, std::vector<int>{0});
    static const global::Placement* one_cuda = global::placement(DeviceType::kCUDA, std::vector<int>{0});
    return device.type == DeviceType::kCUDA ? one_cuda : one_cpu;
  }
  return device.type == DeviceType::kCUDA ? cuda_ : cpu_;
}

const global::NdSbp* Place::broadcast() const {
  static const global::NdSbp* b = global::nd_sbp({global::Sbp::broadcast()});
  return b;
}

const global::NdSbp* Place::split_on(int axis) const { return global::nd_sbp({global::Sbp::split(axis)}); }

const global::NdSbp* Place::hidden_sbp() const {
  return split_.enabled() && split_.sequence_parallel ? split_on(1) : broadcast();
}

GlobalTensor Place::wrap(const Tensor& local, const global::NdSbp* sbp, const Shape& logical) const {
  const global::Placement* pl = placement(local.device());
  if (pl->size() == 1) {
    MF_CHECK(local.shape() == logical, "layers: a local tensor ", local.str(), " of one rank for logical shape ",
             shape_str(logical));
    return GlobalTensor{pl, sbp, logical, local};
  }
  return global::to_global(local, pl, sbp, logical, world_rank_);
}

GlobalTensor round_to(const GlobalTensor& x, DType storage) {
  if (!is_half(storage)) return x;
  return global::map(x, is_half(storage) && storage == DType::kBF16 ? "round_to(bf16)" : "round_to(f16)",
                     [storage](const Tensor& t) { return nn::round_to(t, storage); });
}

}  // namespace mf::layers
