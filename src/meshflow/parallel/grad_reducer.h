// GradReducer: data parallelism's gradient reduction, overlapped with backward.
//
// In the global view a data-parallel parameter is B on the dp axis and its gradient comes out P
// (each rank's backward of its S(0) batch slice); boxing it back to B is an all-reduce. Doing
// that per parameter after backward wastes the time backward still runs, and tiny messages are
// slow, so (as Megatron-LM's and PyTorch's DDP do) the gradients are packed into buckets:
//
//  - Buckets are fixed at construction from the parameter order: walking the parameters in
//    *reverse* (backward produces the last layers' gradients first), a bucket is closed once it
//    holds >= bucket_bytes (or the dtype changes). The same on every rank.
//  - Each parameter gets a grad-ready hook. When the reducer is armed (prepare(), on the last
//    micro-batch of a step), the hook copies the final gradient, scaled (1/N), into its slot of
//    the bucket's flat buffer and frees the parameter's own .grad (the step holds each gradient
//    once); a bucket whose slots are all filled is launched as an async
//    all_reduce — strictly in bucket order, so every rank issues the same collectives in the same
//    order whatever order its hooks fire in, and one at a time (MPI runs concurrent large
//    non-blocking reductions slowly). Every hook also polls the launched bucket, which is what
//    makes MPI progress it while backward computes, and launches the next when it is done.
//  - finish() (after backward) launches what is left (a parameter without a gradient counts as
//    zeros), waits for every bucket, and points each parameter's .grad at its slot: the mean of
//    the ranks' gradients, bit-identical on every rank.
//
// Each step's timeline (backward start/end, every bucket's launch and observed completion) is
// kept for the overlap benchmark; bytes are counted by the communicator (CommStats).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/tensor/tensor.h"

namespace mf::parallel {

struct BucketTiming {
  int64_t nbytes = 0;
  double launch_s = 0;  // seconds since the step's backward started
  double done_s = 0;    // when completion was first observed (a poll or finish())
};

struct ReduceTimeline {
  double backward_s = 0;  // backward start -> finish() called
  double finish_s = 0;    // backward start -> every bucket reduced (finish() returned)
  std::vector<BucketTiming> buckets;
  // Communication not hidden behind backward: finish_s - backward_s.
  double exposed_s() const { return finish_s - backward_s; }
};

class GradReducer {
 public:
  // `params`: the model's parameters in their fixed order (all must require grad, be contiguous
  // and live on the communicator's device). `comm`: the group to reduce over (the data-parallel
  // group; for parameters replicated over tensor-parallel ranks, whose local gradients are
  // partial sums, the dp x tp group). bucket_bytes >= 1. The result is grad_scale x the sum over
  // the group; grad_scale 0 means 1 / comm->size() (the mean). `firings`: how often each
  // parameter's grad-ready hook fires in one backward (nn::hook_firings; empty: once each): its
  // gradient is taken at the last.
  GradReducer(std::vector<Tensor> params, std::shared_ptr<comm::Communicator> comm, int64_t bucket_bytes,
              double grad_scale = 0.0, std::vector<int> firings = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Arms the reducer for the next backward (call it before the last micro-batch's backward) and
  // starts the step's timeline clock.
  void prepare();
  // Completes the reduction (see above) and disarms. Every rank must call it.
  void finish();

  int num_buckets() const;
  // Parameter indices (into `params`) of bucket b, in slot order.
  const std::vector<size_t>& bucket_params(int b) const;
  int64_t total_grad_bytes() const { return total_bytes_; }
  const ReduceTimeline& last_timeline() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the hooks, which must not outlive it
  int64_t total_bytes_ = 0;
};

}  // namespace mf::parallel
