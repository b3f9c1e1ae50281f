#include "meshflow/layers/place.h"

#include <algorithm>

#include "meshflow/core/error.h"

namespace mf::layers {

Place::Place(std::vector<PlaceDim> dims, comm::CommPtr all, bool sequence_parallel)
    : dims_(std::move(dims)), sequence_parallel_(sequence_parallel) {
  MF_CHECK(!dims_.empty(), "layers: a Place of no dimension");
  int ranks_product = 1;
  std::vector<int64_t> mesh_shape;
  std::vector<comm::Communicator*> axis_comms;
  for (size_t d = 0; d < dims_.size(); ++d) {
    for (size_t e = 0; e < d; ++e)
      MF_CHECK(dims_[e].name != dims_[d].name, "layers: a Place names dimension '", dims_[d].name, "' twice");
    const int n = dims_[d].comm ? dims_[d].comm->size() : 1;
    ranks_product *= n;
    if (n == 1) continue;
    mesh_dims_.push_back(static_cast<int>(d));
    mesh_shape.push_back(n);
    axis_comms.push_back(dims_[d].comm.get());
  }
  broadcast_ = global::nd_sbp(std::vector<global::Sbp>(std::max<size_t>(mesh_dims_.size(), 1), global::Sbp::broadcast()));
  hidden_ = sbp({{kSequence, global::Sbp::split(1)}});
  if (sequence_parallel_ && size(kWeights) > 1) hidden_ = with(hidden_, kWeights, global::Sbp::split(1));
  if (mesh_dims_.empty()) {  // one rank
    cpu_ = global::placement(DeviceType::kCPU, std::vector<int>{0});
    cuda_ = global::placement(DeviceType::kCUDA, std::vector<int>{0});
    return;
  }
  MF_CHECK(all && all->size() == ranks_product, "layers: a Place of ", ranks_product,
           " ranks needs the group of all of them (got ", all ? all->size() : 0, ")");
  const std::vector<int> ranks = all->world_ranks();
  world_rank_ = ranks.at(static_cast<size_t>(all->rank()));
  cpu_ = global::placement(DeviceType::kCPU, mesh_shape, ranks);
  cuda_ = global::placement(DeviceType::kCUDA, mesh_shape, ranks);
  cpu_binding_ = std::make_shared<global::PlacementBinding>(cpu_, axis_comms, world_rank_);
  cuda_binding_ = std::make_shared<global::PlacementBinding>(cuda_, axis_comms, world_rank_);
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

int Place::size(std::string_view dim) const {
  comm::Communicator* c = comm(dim);
  return c ? c->size() : 1;
}

int Place::ranks() const {
  if (nominal_size_ != 0) return std::max(nominal_size_, 1);
  int n = 1;
  for (const PlaceDim& d : dims_) n *= d.comm ? d.comm->size() : 1;
  return n;
}

int Place::rank(std::string_view dim) const {
  comm::Communicator* c = comm(dim);
  return c ? c->rank() : 0;
}

comm::Communicator* Place::comm(std::string_view dim) const {
  for (const PlaceDim& d : dims_)
    if (d.name == dim) return d.comm.get();
  return nullptr;
}

const global::Placement* Place::placement(Device device) const {
  if (!cpu_) {  // default-constructed: one rank
    static const global::Placement* one_cpu = global::placement(DeviceType::kCPU, std::vector<int>{0});
    static const global::Placement* one_cuda = global::placement(DeviceType::kCUDA, std::vector<int>{0});
    return device.type == DeviceType::kCUDA ? one_cuda : one_cpu;
  }
  return device.type == DeviceType::kCUDA ? cuda_ : cpu_;
}

int Place::axis_of(std::string_view dim) const {
  for (size_t m = 0; m < mesh_dims_.size(); ++m)
    if (dims_[static_cast<size_t>(mesh_dims_[m])].name == dim) return static_cast<int>(m);
  return mesh_dims_.empty() && dim == kWeights ? 0 : -1;
}

const global::NdSbp* Place::sbp(std::initializer_list<std::pair<std::string_view, global::Sbp>> on) const {
  std::vector<global::Sbp> axes = broadcast_->sbps();
  for (const auto& [name, s] : on)
    if (const int m = axis_of(name); m >= 0) axes[static_cast<size_t>(m)] = s;
  return global::nd_sbp(axes);
}

const global::NdSbp* Place::with(const global::NdSbp* like, std::string_view dim, const global::Sbp& s) const {
  MF_CHECK(like && like->ndim() == broadcast_->ndim(), "layers: an SBP ", like ? like->str() : "(none)", " on a Place of ",
           broadcast_->ndim(), " mesh axes");
  const int m = axis_of(dim);
  if (m < 0 || (*like)[m] == s) return like;
  std::vector<global::Sbp> out = like->sbps();
  out[static_cast<size_t>(m)] = s;
  return global::nd_sbp(out);
}

const global::NdSbp* Place::attention_sbp(const global::NdSbp* like) const {
  return sequence_to_heads_ && size(kSequence) > 1 ? with(like, kSequence, global::Sbp::split(1)) : like;
}

const global::NdSbp* Place::hidden_sbp(const global::NdSbp* like) const {
  const int m = axis_of(kWeights);
  return m < 0 ? like : with(like, kWeights, (*hidden_)[m]);
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

GlobalTensor dropout(const GlobalTensor& x, double p, DType storage) {
  return p > 0.0 ? round_to(global::dropout(x, p), storage) : x;
}

GlobalTensor scale(const GlobalTensor& x, double s, DType storage) {
  return round_to(global::scale(global::context_of(x.placement), x, s), storage);
}

}  // namespace mf::layers
