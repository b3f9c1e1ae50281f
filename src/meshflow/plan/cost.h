// The time model: a training step's seconds under a layout, composed of each pipeline stage's
// compute (GEMMs at the profile's rate for their size, attention, elementwise traffic, the host's
// per-op time), recomputation's extra forward, the schedule's bubble (simulated action by action:
// pipeline_sim.h), tensor-parallel collectives (not overlapped: the runtime waits for them),
// pipeline sends, the data-parallel reduction (the share the profile says backward hides),
// ZeRO's extra collectives and the optimizer's sweep.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "meshflow/plan/hardware.h"
#include "meshflow/plan/layout.h"
#include "meshflow/plan/model_costs.h"

namespace mf::plan {

struct StepTime {
  double compute_s = 0;   // the slowest stage's forward + backward of every micro-batch (recomputation included)
  double bubble_s = 0;    // the pipeline's idle share
  double tp_comm_s = 0;   // tensor-parallel collectives (exposed)
  double pp_comm_s = 0;   // activations sent between stages
  double cp_comm_s = 0;   // context parallelism's keys and values around the ring (or all-to-alls)
  double dp_comm_s = 0;   // the gradient reduction and ZeRO's collectives, exposed
  double optimizer_s = 0; // clipping + AdamW over this rank's parameters
  double total() const { return compute_s + bubble_s + tp_comm_s + pp_comm_s + cp_comm_s + dp_comm_s + optimizer_s; }
};

// `ranges`: the layers of every virtual stage (virtual stage k·pp + s is chunk k of rank s).
StepTime estimate_step_time(const ModelCosts& m, const Layout& l, const HardwareProfile& h,
                            const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace mf::plan
