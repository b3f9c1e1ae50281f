#include "meshflow/train/pipeline_schedule.h"

#include <algorithm>

#include "meshflow/core/error.h"

namespace mf::train {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  MF_THROW("train.dist.pipeline_schedule '", name, "' is not one of gpipe, 1f1b (interleaved_1f1b is not implemented yet)");
}

const char* pipeline_schedule_name(PipelineSchedule s) { return s == PipelineSchedule::kGpipe ? "gpipe" : "1f1b"; }

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                             int64_t micro_batches) {
  MF_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "pipeline_actions: stage ", stage, " of ",
           stages, " with ", micro_batches, " micro-batches");
  std::vector<PipelineAction> a;
  const int64_t m = micro_batches;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int64_t i = 0; i < m; ++i) a.push_back({true, i});
    for (int64_t i = 0; i < m; ++i) a.push_back({false, i});
    return a;
  }
  const int64_t warmup = std::min(stages - stage - 1, m);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) a.push_back({true, f});
  for (; f < m; ++f, ++b) {
    a.push_back({true, f});
    a.push_back({false, b});
  }
  for (; b < m; ++b) a.push_back({false, b});
  return a;
}

int64_t max_in_flight(const std::vector<PipelineAction>& actions) {
  int64_t now = 0, most = 0;
  for (const auto& x : actions) {
    now += x.forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

std::string actions_str(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (const auto& x : actions) {
    if (!s.empty()) s += ' ';
    s += (x.forward ? "F" : "B") + std::to_string(x.micro);
  }
  return s;
}

std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t layers, int64_t stages) {
  MF_CHECK(stages >= 1 && layers >= stages, "pipeline: model.num_layers ", layers,
           " is fewer than the pipeline_parallel_size ", stages, " stages (each stage needs at least one layer)");
  std::vector<std::pair<int64_t, int64_t>> r;
  int64_t start = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t n = layers / stages + (s < layers % stages ? 1 : 0);
    r.emplace_back(start, start + n);
    start += n;
  }
  return r;
}

}  // namespace mf::train
