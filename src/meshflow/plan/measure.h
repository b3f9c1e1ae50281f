// `meshflow plan --measure`: the planner checked on this machine. Under mpirun, every rank trains
// each chosen plan for a few steps in this process (one job: no launch per plan) and the measured
// step time and memory peak stand beside the predicted ones, with the ranking's quality: the
// chosen plan's rank among the measured, its regret and Kendall's tau of the two orders.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/plan/planner.h"
#include "meshflow/runtime/run_summary.h"

namespace mf::plan {

struct MeasureOptions {
  int64_t plans = 0;  // how many, spread evenly over the ranking with the first included; 0: all
  int64_t steps = 6;  // trained per plan; the first two (warm-up) are not timed, the median counts
  bool json = false;  // one JSON line per plan instead of the table
  std::string skip;   // a file of plans measured before (--measure --json lines): left out, so that
                      // an interrupted sweep resumes where it stopped; "": none
  runtime::TrainRun train;  // trains one plan's run (the executable passes train::run_training)
};

struct Measured {
  int64_t rank = 0;          // 1-based, in the predicted order
  double predicted_s = 0, measured_s = 0;
  double predicted_peak = 0, measured_peak = 0;  // bytes per rank (the largest rank's)
};

// Which of `total` ranked plans to measure (0-based indices, ascending).
std::vector<int64_t> plans_to_measure(int64_t total, int64_t count);
// The plans of `text` (lines as --measure --json prints them), each as its layout keys in one
// canonical string; the same string as plan_key gives for the same layout.
std::vector<std::string> measured_plan_keys(const std::string& text, const std::string& source);
std::string plan_key(const Plan& p, int64_t num_layers);
// Kendall's tau-a of two orders given as values (ties count neither way).
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

// Collective over `world` (its size must be the plan's ranks): trains each chosen plan of `r`
// and prints (rank 0) a line per plan and the summary. Returns the measurements.
std::vector<Measured> measure_plans(const Config& c, const PlanResult& r, const MeasureOptions& o,
                                    const comm::CommPtr& world, std::FILE* out);

}  // namespace mf::plan
