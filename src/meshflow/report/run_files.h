// A run folder as `meshflow train` writes it, read for the report: config.yaml (verbatim, and the
// run's layout), metrics.jsonl (training and evaluation lines, per-rank figures when present)
// and trace.json (when the run was profiled).
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshflow/global/parallel_dims.h"

namespace mf::report {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// One rank's figures of a training line's "ranks" (seconds, bytes); NaN where absent.
struct RankMetrics {
  int64_t rank = 0, stage = -1;  // its pipeline stage (-1: not logged)
  // Its index along each parallel dimension (global::dim_specs(); pp's is `stage`), -1 when not logged.
  std::vector<int64_t> coordinate;
  double step_time = kMissing, exposed_comm_time = kMissing, pipeline_wait_time = kMissing;
  double peak_bytes = kMissing, mem_parameters = kMissing, mem_gradients = kMissing;
  double mem_optimizer_state = kMissing, mem_activations = kMissing, mem_comm_buffers = kMissing;
};

// A training line (every log period). Optional keys are NaN when absent.
struct TrainPoint {
  int64_t step = 0;
  double loss = kMissing, lr = kMissing, grad_norm = kMissing, tokens_per_sec = kMissing, mfu = kMissing;
  double step_time = kMissing, exposed_comm_time = kMissing, loss_scale = kMissing;
  RankMetrics rank0;               // this line's top-level figures (rank 0's), as a rank
  std::vector<RankMetrics> ranks;  // "ranks": one per world rank; empty in older files
};

// An evaluation line: val_loss, val_ppl and any other val_* metric.
struct EvalPoint {
  int64_t step = 0;
  std::map<std::string, double> values;  // "val_loss" -> ..., NaN for null
};

struct Metrics {
  std::vector<TrainPoint> train;
  std::vector<EvalPoint> eval;
  std::vector<std::string> warnings;  // "<path>:<line>: ..." for each line left out
};

// Reads metrics.jsonl; throws mf::Error naming the file and line of a line that is not a JSON
// object, lacks "step", or holds a non-number where a number belongs. Blank lines and lines of
// other kinds (neither "loss" nor a val_* key) are skipped. A last line cut short (no newline at
// its end and not JSON: a run stopped while writing it, a full disk) is left out with a warning.
Metrics load_metrics(const std::string& path);

// The run's layout from config.yaml (missing keys keep these defaults).
struct RunLayout {
  global::ParallelDims dims;   // train.dist.*_parallel_size; a 0 is derived from the ranks logged
  int64_t virtual_stages = 1;  // train.dist.virtual_pipeline_size
  std::string schedule;    // train.dist.pipeline_schedule
  std::string model_name;  // model.name
};

struct RunFiles {
  std::string dir;   // as given
  std::string name;  // the folder's name: the run's label in legends
  std::string config_text;  // config.yaml verbatim ("" when absent)
  RunLayout layout;
  Metrics metrics;
  std::optional<nlohmann::json> trace;  // trace.json when present
};

// Reads a run folder. Throws mf::Error when the folder or its metrics.jsonl is missing, or a
// file does not parse (naming the file and line).
RunFiles load_run(const std::string& dir);

}  // namespace mf::report
