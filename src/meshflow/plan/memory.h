// The memory model: a rank's peak bytes in a training step under a layout, broken down as the
// run's memory report is (train/step_stats.h: MemoryReport) — parameters, gradients and optimizer
// state per ZeRO stage and dtype; activations per layer by recomputation and sequence
// parallelism, times the micro-batches each pipeline schedule keeps in flight; the backward's
// workspace; ZeRO's communication buffers. The pipeline rank with the largest peak counts.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/plan/layout.h"
#include "meshflow/plan/model_costs.h"

namespace mf::plan {

// Bytes of one rank. parameters, gradients and optimizer_state are the model state as the report
// counts it after a step; `peak` is the allocator's peak during a step; `activations` what the
// report calls "activations and workspace": the peak less that model state (so it is smaller than
// what backward keeps when the gradients do not all exist at the peak: one process without
// accumulation frees them every step and the peak comes before they are made).
struct MemoryEstimate {
  int64_t stage = 0;  // the pipeline rank the figures are for (the one with the largest peak)
  double parameters = 0, gradients = 0, optimizer_state = 0;
  double activations = 0;
  double peak = 0;
  // Of the peak: what backward keeps for the micro-batches in flight, and the temporaries of the
  // backward at that moment (the loss head's logits gradient, a recomputed layer, gathered ZeRO-3 units).
  double kept = 0, workspace = 0;
};

// The layers of every virtual stage under `l` (virtual stage k·pp + s is chunk k of rank s): the
// split the run makes (runtime::pipeline_layers of the run's config).
std::vector<std::pair<int64_t, int64_t>> stage_layers(const Config& c, const ModelCosts& m, const Layout& l);
MemoryEstimate estimate_memory(const ModelCosts& m, const Layout& l, const std::vector<std::pair<int64_t, int64_t>>& ranges);
// The same with the run's split made from `c`.
MemoryEstimate estimate_memory(const Config& c, const ModelCosts& m, const Layout& l);

// `c` with the layout's keys set (what a run of the layout reads).
Config with_layout(const Config& c, const ModelCosts& m, const Layout& l);

}  // namespace mf::plan
