// The pipeline executor: runs a step's micro-batches through this rank's pipeline stage(s) in the
// schedule's order (GPipe, 1F1B, interleaved 1F1B; parallel/pipeline_schedule.h), moving
// activations and their gradients between stages by send/recv on the pipeline group. Without
// pipeline parallelism it is one stage running 1F1B: forward and backward of each micro-batch in
// turn. Training and evaluation run through the same loop (evaluation: forwards only).
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "meshflow/models/model.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/parallel/pipeline_schedule.h"

namespace mf::train {

// This stage, the last step: the most micro-batches whose activations were held at once (from
// the schedule); from the allocator: the bytes one micro-batch's forward kept and the peak of the
// kept activations (gradient buffers excluded); seconds spent waiting for the neighbours'
// activations and gradients (the bubble, as this stage sees it) and in all.
struct PipelineStats {
  int64_t max_in_flight = 0;
  int64_t micro_activation_bytes = 0, peak_activation_bytes = 0;
  double wait_seconds = 0, step_seconds = 0;
};

class PipelineExecutor {
 public:
  using Batch = models::Batch;  // host tensors
  // `model` is this rank's stage; `groups.ptr("pp")` its pipeline group (null: one stage), `groups.ptr("dp")`
  // the data-parallel group whose batch slice this rank's rows are.
  PipelineExecutor(models::Model& model, const parallel::NamedGroups& groups, Device device);

  // One step's forwards and backwards of `batches` (the micro-batches, each `rows` rows of this
  // data-parallel rank) in `schedule`'s order; `loss_totals`: the step's items of each loss term
  // over every micro-batch and data-parallel rank (Model::loss_counts()), so that the micro-batch
  // losses add up to the step's loss. The losses are multiplied by backward_scale before
  // backward; `before_last_backward` runs before this stage's last backward (the gradients it
  // makes are final). Random streams: micro-batch i draws streams from the default generator's
  // next stream + i x the model's streams per forward, which the generator is left past.
  // Returns the sum of the micro-batch losses (0 on a stage without the head).
  double train(const std::vector<Batch>& batches, const std::vector<double>& loss_totals,
               parallel::PipelineSchedule schedule, int64_t seq_len, double backward_scale,
               const std::function<void()>& before_last_backward);
  // The loss of one batch (its own means), forwards only, in eval mode without gradients, and the
  // model's metrics' (sum, count) (Model::head_metrics()); 0 on a stage without the head.
  struct Evaluation {
    double loss = 0;
    std::vector<std::pair<double, double>> metrics;
  };
  Evaluation evaluate(const Batch& batch);
  const PipelineStats& last_stats() const { return stats_; }

 private:
  struct Run;
  // received: parallel::sends_received of the actions (empty: every send waited for at the end).
  double run(const std::vector<parallel::PipelineAction>& actions, const std::vector<std::vector<int64_t>>& received,
             const std::vector<Batch>& batches, const std::vector<double>& loss_totals, int64_t seq_len, bool training,
             double backward_scale, const std::function<void()>& before_last_backward);
  Tensor stage_buffer(int64_t rows, int64_t seq_len) const;

  models::Model* model_;
  parallel::NamedGroups g_;
  Device device_;
  PipelineStats stats_;
  std::vector<std::pair<double, double>> last_metrics_;  // evaluate()'s
};

}  // namespace mf::train
