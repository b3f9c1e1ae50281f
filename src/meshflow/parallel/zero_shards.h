// ZeRO stages 2 and 3: gradients (2) and also parameters (3) sharded over the data-parallel group.
//
// In the global view the optimizer's state, the reduced gradients and (stage 3) the parameters
// are S(0) on the dp axis of a parameter flattened: dp rank r owns elements
// [split_start(numel, N, r), +split_size(numel, N, r)) of every parameter (of its tensor-parallel
// piece) — the same slices ZeRO-1 gives the optimizer, so checkpoints do not depend on the stage.
//
// Parameters are organised in *groups*: the parameters one unit of the model's forward uses
// first (the embeddings, one block, the head; models::Model::parameter_units()). A group's slices
// are laid out rank-major — segment q of a group holds slice q of each of its parameters, the
// same order on every rank, padded to a common length S — so each group needs one collective
// of equal blocks:
//
//  - Gradients. On the step's last backward pass, a group whose gradients are all final is packed
//    (each parameter's N slices into the N segments of a temporary (N*S) buffer, times the
//    gradient scale) and reduce-scattered, asynchronously, into this rank's persistent gradient
//    segment (S); the parameters' full gradients are dropped at once. Parameters marked
//    `tp_replicated` (their tensor-parallel copies' gradients are partial sums) come last in the
//    group, and their part of the segment is then all-reduced over `tp`. finish() waits and
//    makes shard_grad(k) a view of the segment.
//  - Parameters (stage 3). The persistent parameter segment of each group holds this rank's
//    slices; shard(k) is a view of it (the optimizer updates these). The model's parameter
//    tensors keep their shape and autograd identity, but their storage is released except while
//    a unit uses them: enter(unit) all-gathers the unit's groups into the parameters (waiting for
//    a prefetch) and starts the all-gather of the next unit of the same chunk; leave(unit, y)
//    releases them and returns y wrapped so that backward calls back before the unit's backward,
//    which gathers them again (prefetching the previous unit). A group is released again once all
//    its parameters' gradients of the backward pass are accumulated.
//
// All collectives run on the dp group (and tp for the replicated tails) in an order that every
// dp rank reproduces: the same schedule runs the same units and fires the same hooks.
#pragma once
#include <memory>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/nn/param_use_hooks.h"

namespace mf::parallel {

class ZeroShards final : public nn::ParamUseHooks {
 public:
  struct Options {
    int stage = 2;                               // 2 or 3
    std::shared_ptr<comm::Communicator> dp;      // the group the shards are over (size N > 1)
    std::shared_ptr<comm::Communicator> tp;      // sums the replicated parameters' gradients; may be null
    // Sums every gradient slice (the ranks splitting the sequence hold partial sums of all of
    // them: context parallelism); may be null.
    std::shared_ptr<comm::Communicator> cp;
    double grad_scale = 1.0;                     // applied to the gradients before the reduction
  };
  // `params`: the model's parameters (contiguous leaves that require grad); `tp_replicated[k]`:
  // parameter k is replicated over tp (its gradient a partial sum there); `units`: the model's
  // forward units in order (models::Model::parameter_units()); every parameter must be in one.
  // Stage 3 releases the parameters' storage here (after copying this rank's slices).
  ZeroShards(std::vector<Tensor> params, std::vector<bool> tp_replicated, std::vector<nn::ParamUnit> units,
             Options opts);
  ~ZeroShards() override;
  ZeroShards(const ZeroShards&) = delete;
  ZeroShards& operator=(const ZeroShards&) = delete;

  // This rank's slice of parameter k, flat: a view of the parameter (stage 2) or of the group's
  // parameter segment (stage 3).
  Tensor shard(size_t k) const;
  // Its reduced gradient (after finish()), a view of the group's gradient segment.
  Tensor shard_grad(size_t k) const;
  int64_t shard_start(size_t k) const;

  void prepare();  // arms the gradient reduction for the step's last backward pass
  void finish();   // reduces what is left, waits; every dp (and tp) rank must call it
  // Seconds the last finish() took to pack what was left and wait for the reductions: the
  // gradient communication not hidden behind backward (as GradReducer's exposed_s()).
  double last_exposed_s() const;

  // ParamUseHooks (stage 3; no-ops at stage 2).
  void enter(int64_t unit) override;
  Tensor leave(int64_t unit, const Tensor& out) override;

  // Stage 3 (a no-op at stage 2): every parameter released.
  void release_all();

  int num_groups() const;
  // This rank's persistent gradient segments (bytes): the reduced gradient slices.
  int64_t grad_segment_bytes() const;
  // The most bytes of communication buffers (reduce-scatter packs, all-gather targets) alive at
  // once since reset_buffer_peak().
  int64_t buffer_peak_bytes() const;
  void reset_buffer_peak();

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the hooks
};

}  // namespace mf::parallel
