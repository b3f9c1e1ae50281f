// The auto-parallel planner (`meshflow plan`, graph.auto_parallel.enabled): every layout of the
// run's model on N ranks (layout.h), each with its predicted memory (memory.h) and step time
// (cost.h) on a hardware profile (hardware.h), ranked by step time; those that do not fit in
// memory or do not divide the model are kept with the reason.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/plan/cost.h"
#include "meshflow/plan/hardware.h"
#include "meshflow/plan/layout.h"
#include "meshflow/plan/memory.h"
#include "meshflow/plan/model_costs.h"

namespace mf::plan {

struct PlanOptions {
  int64_t ranks = 1;
  double memory_per_rank_bytes = 0;  // 0: the profile's memory per rank
  std::string hardware;              // hardware_profile()'s name or file; "": this machine
  std::optional<HardwareProfile> profile;  // given: this profile, not `hardware`
};

struct Plan {
  Layout layout;
  MemoryEstimate memory;
  StepTime time;
  double tokens_per_s = 0, mfu = 0;
};

struct PlanResult {
  std::string model_line;  // the model's one-line description
  ModelCosts model;
  HardwareProfile hardware;
  int64_t ranks = 1, global_batch = 0;
  double memory_limit = 0;
  std::vector<Plan> ranked;  // fastest first
  std::vector<Rejected> rejected;
};

PlanResult make_plan(const Config& c, const PlanOptions& o);
// The options graph.auto_parallel.* give for `ranks` processes.
PlanOptions plan_options(const Config& c, int64_t ranks);
// The ranked table (the first `top` plans; 0: all), the rejection counts by reason and, with
// `rejected`, every rejected layout with its reason.
std::string plan_report(const PlanResult& r, int64_t top, bool rejected);
// `c` with the plan's layout set and graph.auto_parallel.enabled off: the config a run of the
// plan writes, which reproduces it without the planner.
Config apply_plan(const Config& c, const ModelCosts& m, const Layout& l);
// One line naming a layout's keys: "train.dist.data_parallel_size=2 ...".
std::string layout_overrides(const Layout& l, int64_t num_layers);

}  // namespace mf::plan
