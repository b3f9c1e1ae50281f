// A pipeline step simulated action by action, for the time model: every pipeline rank runs its
// schedule's actions in order (parallel::pipeline_actions), each once its input has arrived — a
// forward the previous virtual stage's output of the micro-batch, a backward the next one's
// gradient. With more processes than cores the busy ones share the cores, and a process waiting
// for its input still takes a little of them (it polls): so the simulation knows, at every
// moment, how many compute and how many wait, which the bubble formulas cannot.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/parallel/pipeline_schedule.h"

namespace mf::plan {

struct PipelineRun {
  parallel::PipelineSchedule schedule = parallel::PipelineSchedule::k1F1B;
  int64_t stages = 1, chunks = 1, micro_batches = 1;
  // Seconds of one micro-batch's forward and backward of chunk k on pipeline rank s ([s][k]) at a
  // process's own rate: the cores to itself.
  std::vector<std::vector<double>> forward_s, backward_s;
  // Core sharing: each pipeline rank is `processes_per_stage` processes (its data- and
  // tensor-parallel ranks, in step). `capacity`: how many processes the cores run at their own
  // rate at once (cores / threads per process); 0: every process has cores of its own.
  // `waiting_load`: the share of that capacity a waiting process takes.
  double processes_per_stage = 1, capacity = 0, waiting_load = 0;
};

// Seconds from the first action's start to the last one's end. Beyond 4 x stages micro-batches,
// the steady state's time per micro-batch (from 2 and 3 x stages) extends the simulated.
double simulate_pipeline(const PipelineRun& r);

}  // namespace mf::plan
