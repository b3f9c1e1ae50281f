// A parallel layout the planner can choose: the mesh, the pipeline schedule, sequence
// parallelism, ZeRO, the micro-batch and accumulation of the global batch and recomputation — the
// train.* keys of a run, and the candidates for N ranks with the reason each infeasible one is out.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/global/parallel_dims.h"
#include "meshflow/plan/model_costs.h"

namespace mf::plan {

enum class Recompute { kNone, kSelective, kFull };
const char* recompute_name(Recompute r);

struct Layout {
  global::ParallelDims dims;      // the size of each parallel dimension
  int64_t dp() const { return dims.size("dp"); }
  int64_t tp() const { return dims.size("tp"); }
  int64_t pp() const { return dims.size("pp"); }
  int64_t cp() const { return dims.size("cp"); }
  std::string schedule = "1f1b";  // train.dist.pipeline_schedule (1f1b without pipelining)
  int64_t virtual_stages = 1;     // train.dist.virtual_pipeline_size
  bool sequence_parallel = false;
  bool context_all_to_all = false;  // train.dist.context_parallel_mode: all_to_all (else ring)
  int64_t zero_stage = 0;  // 0: off
  int64_t micro_batch = 1, accumulation = 1;
  Recompute recompute = Recompute::kNone;
  int64_t recompute_layers = 0;  // kFull: the first N layers of the model (all of them: num_layers)

  int64_t ranks() const { return dims.product(); }
  int64_t global_batch() const { return micro_batch * accumulation * dims.batch_ranks(); }
  // The run's keys (key, value text) that set this layout: train.dist.*, ZeRO, the batch split,
  // train.activation_checkpoint.*.
  std::vector<std::pair<std::string, std::string>> config_keys(int64_t num_layers) const;
  // "dp2 tp2 pp2 1f1b mb4x2 zero1 recompute=full:4" — compact, for tables and logs.
  std::string str() const;
};

// The layout keys the planner chooses (a user's explicit value of one is kept as a constraint).
const std::vector<std::string>& layout_keys();

// A layout the run's sizes cannot take, and why.
struct Rejected {
  Layout layout;
  std::string reason;  // "tp 3 does not divide model.num_attention_heads 4", "memory: ..."
};

struct Candidates {
  std::vector<Layout> feasible;
  std::vector<Rejected> rejected;
};

// Every layout of `ranks` processes (every split of them over the parallel dimensions) for the run's global batch (micro-batches of up to 64 rows,
// interleaving with up to 8 chunks per rank): train.global_batch_size, or
// (when 0) train_micro_batch_size x max(num_accumulation_steps, 1) x ranks. A layout key whose
// value differs from its default (layout_keys()) is the user's constraint: every candidate keeps it.
Candidates enumerate_layouts(const Config& c, const ModelCosts& m, int64_t ranks);
// The global batch enumerate_layouts keeps.
int64_t planned_global_batch(const Config& c, int64_t ranks);

}  // namespace mf::plan
