// Pipeline schedules: the order in which one stage runs the forward (F) and backward (B) passes
// of a step's micro-batches (the gradient-accumulation steps).
//
//   gpipe  F0 F1 ... F(m-1) B0 B1 ... B(m-1): every micro-batch's activations are held at once.
//   1f1b   PipeDream-flush (Megatron's default): stage s of p first runs min(p - s - 1, m)
//          forwards (warm-up), then alternates one forward, one backward, then drains the
//          remaining backwards; at most p - s micro-batches are in flight on stage s.
// Both run the backwards in micro-batch order, so the last action of every stage is B(m-1).
// The bubble is (p - 1) / (m + p - 1) of the step for both; 1f1b bounds memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mf::train {

enum class PipelineSchedule { kGpipe, k1F1B };

// "gpipe" | "1f1b"; throws naming train.dist.pipeline_schedule and the choices otherwise.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  bool forward = true;  // false: backward
  int64_t micro = 0;
  bool operator==(const PipelineAction&) const = default;
};

// The actions of `stage` (0-based, of `stages`) for `micro_batches` micro-batches.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                             int64_t micro_batches);
// The most micro-batches in flight (forward done, backward not yet) during `actions`.
int64_t max_in_flight(const std::vector<PipelineAction>& actions);
// "F0 F1 B0 ..." for messages and tests.
std::string actions_str(const std::vector<PipelineAction>& actions);

// Contiguous layer ranges for the stages, as even as possible (the first `layers % stages` stages
// take one more); throws when there are fewer layers than stages.
std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t layers, int64_t stages);

}  // namespace mf::train
