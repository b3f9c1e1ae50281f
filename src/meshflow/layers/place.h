// Where a model's layers live, and what every global-view layer shares. A Place is the placement
// of a layer's tensors — the ranks of its pipeline stage that split layers (the `tensor` mesh axis;
// one rank in a single process) — with the SBP the activations between layers have there: B, or
// S(1) (split on the sequence axis) when the run splits the sequence. The runtime builds it
// (models/model.h hands it to the model, the model to its layers); the model never reads it.
// A model is built whole on every rank: the parts another rank holds (other pipeline stages) are
// built on a shape-only Place, whose layers declare their parameters (names, logical shapes,
// splits: nn::Module::declared_parameters()) without allocating them. The planner and the weight
// checks build the whole model so (Place::shape_only with the tensor-parallel size to plan).
// The data-parallel axis is not part of it: each data-parallel rank runs its slice of the batch
// (random/batch_slice.h) and the runtime reduces the gradients (parallel/grad_sync.h).
//
// A layer declares its parameters' SBPs (layers/layers.h); its forward calls
// global ops (global/global_ops.h), which pick their signatures and box their inputs.
#pragma once
#include <memory>

#include "meshflow/global/global_ops.h"
#include "meshflow/nn/mixed_precision.h"
#include "meshflow/nn/tensor_parallel.h"

namespace mf::layers {

using global::GlobalTensor;

class Place {
 public:
  Place() = default;  // one rank
  // The ranks of `split` (its communicator; none: one rank), bound to it for global ops on the
  // CPU and on CUDA.
  explicit Place(const nn::TensorParallel& split);
  // A shape-only Place of `size` ranks (no communicator): its layers declare parameters split as
  // on `size` ranks (as rank 0) and hold none. kAnyRanks: every split a layer takes over several
  // ranks, unchecked (the planner's view: which parameters tensor parallelism splits).
  static constexpr int kAnyRanks = -1;
  static Place shape_only(int size);
  // The same ranks, shape-only: a part of the model another rank holds.
  Place elsewhere() const;
  // Whether this rank holds the layers built on it (false: shape-only).
  bool held() const { return held_; }

  // The placement of tensors on `device` (the same ranks whatever the device).
  const global::Placement* placement(Device device) const;
  int world_rank() const { return world_rank_; }
  int size() const { return nominal_size_ > 0 ? nominal_size_ : split_.size(); }
  // Whether the layers split their parameters here: more than one rank, or any number.
  bool splits() const { return size() > 1 || nominal_size_ == kAnyRanks; }
  bool any_ranks() const { return nominal_size_ == kAnyRanks; }
  int rank() const { return split_.rank(); }
  // How the layers' parameters are split (nn/tensor_parallel.h's layouts use it).
  const nn::TensorParallel& split() const { return split_; }
  // The SBP of the activations between layers: B, or S(1) when the sequence is split.
  const global::NdSbp* hidden_sbp() const;
  const global::NdSbp* broadcast() const;
  const global::NdSbp* split_on(int axis) const;

  // `local` as this rank's piece of a global tensor with `sbp` and `logical` shape (throws when
  // its shape is not the piece's); B: the logical shape is its own.
  GlobalTensor wrap(const Tensor& local, const global::NdSbp* sbp, const Shape& logical) const;
  GlobalTensor wrap(const Tensor& local) const { return wrap(local, broadcast(), local.shape()); }

 private:
  nn::TensorParallel split_;
  int world_rank_ = 0;
  bool held_ = true;
  int nominal_size_ = 0;  // a shape-only Place's ranks (0: the communicator's; kAnyRanks)
  const global::Placement* cpu_ = nullptr;
  const global::Placement* cuda_ = nullptr;
  std::shared_ptr<global::PlacementBinding> cpu_binding_, cuda_binding_;
};

// Mixed precision on global tensors (nn/mixed_precision.h): an activation leaving a layer rounded
// through the storage dtype; itself for f32/f64.
GlobalTensor round_to(const GlobalTensor& x, DType storage);

}  // namespace mf::layers
