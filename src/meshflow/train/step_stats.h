// What a training step and an evaluation report (StepStats, EvalStats: hooks read them), and the
// services that fill them in: this rank's memory by kind, every rank's figures gathered at a
// logged step, and the StepMeter (per-log-period means, tokens/s and MFU over a peak FLOP/s).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/core/device.h"
#include "meshflow/core/dtype.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/parallel/grad_sync.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/runtime/peak_flops.h"

namespace mf::train {

// This rank's memory by kind, from the tensors themselves and the allocator (bytes). Gradients
// count each buffer once: under data parallelism they live in the reduction buckets.
struct MemoryReport {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0;
  int64_t peak = 0;         // the allocator's peak during the step
  int64_t activations = 0;  // peak minus the model state above (activations and workspaces)
  // Peak of the step's communication buffers beyond the model state: ZeRO 2/3's reduce-scatter
  // packs and all-gather targets (data-parallel buckets hold the gradients themselves; tensor-
  // and pipeline-parallel messages are activations). Part of `activations`.
  int64_t comm_buffers = 0;
};

// One rank's figures of a step (StepStats::ranks).
struct RankStepStats {
  int rank = 0;                     // in the world
  std::vector<int64_t> coordinate;  // its index along each parallel dimension (global::dim_specs())
  double step_seconds = 0, exposed_comm_s = 0;
  double pipeline_wait_s = 0;  // waiting for the neighbour stages' activations and gradients
  double comm_wait_s = 0;      // blocked in any collective or send/recv (comm::comm_wait_seconds)
  // Means per step over the steps since the previous logged one (the log period): step time and
  // time blocked in communication; their difference is the rank's compute time.
  double mean_step_s = 0, mean_comm_wait_s = 0;
  double mean_compute_s() const { return mean_step_s - mean_comm_wait_s; }
  MemoryReport memory;
  int64_t peak_bytes = 0;
};

struct StepStats {
  int64_t iter = 0;  // 1-based: the number of optimizer steps done
  double loss = 0, lr = 0, grad_norm = 0;
  double step_seconds = 0, tokens_per_sec = 0, mfu = 0;
  // Set when this step beat the peak FLOP/s in use, which was raised: what happened, for the log.
  std::string peak_note;
  int64_t peak_bytes = 0;
  // Bytes a ring algorithm sends for this rank's collectives and sends of the step (every group:
  // dp, tp, pp): estimated from the tensors' sizes (comm::CommStats), not measured on the wire.
  int64_t comm_bytes_est = 0;
  MemoryReport memory;
  // Seconds the step waited for its gradient reductions after backward (data-parallel buckets,
  // ZeRO 2/3 reduce-scatters, the tied parameters' sum over the first and last pipeline stage):
  // the gradient communication not hidden behind backward.
  double exposed_comm_s = 0;
  // Mixed precision: the loss scale the step ran with (1 without fp16 scaling), whether its
  // gradients overflowed so that the update was skipped, and the skipped steps so far.
  double loss_scale = 1;
  bool skipped = false;
  int64_t skipped_iters = 0;
  // Every rank's figures of this step, by world rank, gathered at log steps (Trainer::log_step());
  // empty at the other steps.
  std::vector<RankStepStats> ranks;
  // Seconds this rank was blocked in communication during the step (every group).
  double comm_wait_s = 0;
  // Means per step over the log period (set on logged steps): step time, time blocked in communication.
  double mean_step_s = 0, mean_comm_wait_s = 0;
};

struct EvalStats {
  int64_t iter = 0;
  double loss = 0;
  // exp(loss) for a causal language model (its loss is the mean token cross-entropy); NaN for
  // other models (BERT's loss sums its masked-LM and next-sentence terms).
  double perplexity = 0;
  // The model's metrics beside the loss (Model::eval_metric_names(): e.g. "accuracy"), over every
  // evaluation batch and data-parallel rank.
  std::vector<std::pair<std::string, double>> metrics;
};

// This rank's memory: the model state `sync` and `optimizer` hold, and `peak_bytes` (the
// allocator's peak of the step) less that state as activations.
MemoryReport memory_report(const parallel::GradSync& sync, optim::Optimizer& optimizer, int64_t peak_bytes);

// Every rank's figures of step `s` (this rank's: `s` and `pipeline_wait_s`), by world rank.
// Collective over groups.everyone(): one all-reduce.
std::vector<RankStepStats> gather_rank_stats(const StepStats& s, double pipeline_wait_s,
                                             const parallel::NamedGroups& groups);

// The step's timing and throughput figures: tokens/s, MFU over the peak FLOP/s of all ranks, and
// the means per step over each log period.
class StepMeter {
 public:
  // At the start of training: the peak of `ranks` ranks, each the device's (its data sheet's for
  // a GPU, running `param_dtype`; the CPU's nominal or measured peak, the larger).
  void start(Device device, DType param_dtype, int64_t ranks);
  // At a step's start: its clock, and this rank's time blocked in communication so far.
  void begin_step();
  // The step done: sets its seconds, its time blocked in communication, its tokens/s, MFU and
  // peak note, and adds it to the period's sums.
  void end_step(StepStats& s, int64_t tokens_per_step, double flops_per_token);
  // A logged step: sets the period's means per step into `s` and starts the next period.
  void end_period(StepStats& s);

  double peak_flops() const { return peak_.flops(); }
  const std::string& peak_source() const { return peak_.source(); }

 private:
  runtime::PeakTracker peak_;
  Device device_ = cpu_device();
  double ranks_ = 1;
  std::chrono::steady_clock::time_point step_start_;
  double step_start_comm_wait_s_ = 0;
  double period_step_s_ = 0, period_wait_s_ = 0;  // sums since the last logged step
  int64_t period_steps_ = 0;
};

}  // namespace mf::train
