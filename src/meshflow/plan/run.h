// `meshflow plan` and graph.auto_parallel.enabled: the planner run from the command line, and
// the layout a training run takes from it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/runtime/run_summary.h"

namespace mf::plan {

struct PlanArgs {
  int64_t nproc = 1;
  double memory_per_rank_gb = 0;  // 0: graph.auto_parallel.memory_per_rank_gb, else the profile's
  std::string hardware;           // "": graph.auto_parallel.hardware
  int64_t top = 20;
  bool rejected = false;
  bool json = false;              // every plan as a JSON line (layout keys, predictions)
  int64_t measure = -1;           // >= 0: train that many plans (0: all) on `world` (measure.h)
  int64_t steps = 6;              // steps per measured plan
  std::string skip;               // plans measured before (--measure --json lines) that --measure leaves out
  runtime::TrainRun train;        // --measure: trains one plan (the executable passes train::run_training)
};

// Prints the ranked plans; returns the exit status (1 when no layout is feasible). With
// `measure`, collective over `world` (every rank plans with rank 0's hardware profile, then the
// plans are measured); else rank 0 alone prints.
int run_plan(const Config& c, const PlanArgs& a, std::FILE* out, const comm::CommPtr& world = nullptr);

// With graph.auto_parallel.enabled: `c` with the best plan for the world's size (rank 0 plans,
// every rank takes its choice, as its key=value line), logged on rank 0; else `c` itself. Throws when no layout fits,
// naming the reasons.
Config auto_parallel(const Config& c, const comm::CommPtr& world, std::FILE* out);

}  // namespace mf::plan
