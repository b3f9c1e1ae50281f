// Where a model's layers live, and what every global-view layer shares. A Place is the placement
// of a layer's tensors — the ranks of its pipeline stage that split layers (the `tensor` mesh axis;
// one rank in a single process) — with the SBP the activations between layers have there: B, or
// S(1) (split on the sequence axis) when the run splits the sequence. The runtime builds it
// (models/model.h hands it to the model, the model to its layers); the model never reads it.
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

  // The placement of tensors on `device` (the same ranks whatever the device).
  const global::Placement* placement(Device device) const;
  int world_rank() const { return world_rank_; }
  int size() const { return split_.size(); }
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
  const global::Placement* cpu_ = nullptr;
  const global::Placement* cuda_ = nullptr;
  std::shared_ptr<global::PlacementBinding> cpu_binding_, cuda_binding_;
};

// Mixed precision on global tensors (nn/mixed_precision.h): an activation leaving a layer rounded
// through the storage dtype; itself for f32/f64.
GlobalTensor round_to(const GlobalTensor& x, DType storage);

}  // namespace mf::layers
