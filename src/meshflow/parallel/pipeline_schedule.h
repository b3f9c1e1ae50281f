// Pipeline schedules: the order in which one stage runs the forward (F) and backward (B) passes
// of a step's micro-batches (the gradient-accumulation steps).
//
//   gpipe  F0 F1 ... F(m-1) B0 B1 ... B(m-1): every micro-batch's activations are held at once.
//   1f1b   PipeDream-flush (Megatron's default): stage s of p first runs min(p - s - 1, m)
//          forwards (warm-up), then alternates one forward, one backward, then drains the
//          remaining backwards; at most p - s micro-batches are in flight on stage s.
//   interleaved_1f1b  Megatron-LM's interleaved 1F1B: each rank holds v model chunks (virtual
//          stages; chunk c of rank s is stage c·p + s of v·p), m must be a multiple of p. Warm-up
//          (p - s - 1)·2 + (v - 1)·p forwards, then 1F1B over the v·m (micro-batch, chunk) pairs;
//          forwards visit chunks 0..v-1 in groups of p micro-batches, backwards v-1..0.
// gpipe and 1f1b run the backwards in micro-batch order, so their last action is B(m-1); the
// interleaved schedule ends with B(m-1) of chunk 0. The bubble is (p - 1) / (m + p - 1) of the
// step for gpipe and 1f1b, (p - 1) / (v·m + p - 1) interleaved; 1f1b bounds memory.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mf::parallel {

enum class PipelineSchedule { kGpipe, k1F1B, kInterleaved1F1B };

// "gpipe" | "1f1b" | "interleaved_1f1b"; throws naming train.dist.pipeline_schedule otherwise.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  bool forward = true;  // false: backward
  int64_t micro = 0;
  int64_t chunk = 0;    // the model chunk (interleaved schedule; 0 otherwise)
  bool operator==(const PipelineAction&) const = default;
};

// The actions of `stage` (0-based, of `stages`) for `micro_batches` micro-batches; `chunks`
// (virtual stages per rank) > 1 only for the interleaved schedule. Throws (naming the config keys)
// for an impossible set-up: interleaving with micro-batches not a multiple of the stages.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                             int64_t micro_batches, int64_t chunks = 1);
// When a stage may release what it sent. Each action sends one message at most, after its
// receive: a forward its output to virtual stage j + 1, a backward its input's gradient to j - 1.
// A send has been received once this stage receives a message that the receiving rank sent at or
// after that receive in its own order, so waiting for it then cannot block. For each action of
// `stage`, the earlier actions (indices into pipeline_actions) whose sends that action's receive
// proves received, each listed once; a send no receive proves (the step's last) is waited for at
// the end of the step. Empty lists for one stage.
std::vector<std::vector<int64_t>> sends_received(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                                 int64_t micro_batches, int64_t chunks = 1);
// The most micro-batches in flight (forward done, backward not yet) during `actions`.
int64_t max_in_flight(const std::vector<PipelineAction>& actions);
// "F0 F1 B0 ..." for messages and tests ("F0.1": micro-batch 0 of chunk 1 when chunked).
std::string actions_str(const std::vector<PipelineAction>& actions);

// Contiguous layer ranges for the (virtual) stages, as even as possible (the first
// `layers % stages` take one more); throws when there are fewer layers than stages.
std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t layers, int64_t stages);

// Contiguous layer ranges, at least one layer per stage, minimising the most expensive stage
// under `cost(stage, first_layer, end_layer)`. Ties prefer more layers on earlier stages.
using StageCost = std::function<double(int64_t stage, int64_t first_layer, int64_t end_layer)>;
std::vector<std::pair<int64_t, int64_t>> balanced_split_layers(int64_t layers, int64_t stages, const StageCost& cost);
// The same with a layer costing 1, the first stage adding `first_extra` and the last `last_extra`.
std::vector<std::pair<int64_t, int64_t>> balanced_split_layers(int64_t layers, int64_t stages, double first_extra,
                                                               double last_extra);
// Layer ranges from LiBai's custom_pipeline_stage_id: the stage of every layer, non-decreasing
// from 0 to stages - 1 with none skipped; throws naming train.dist.custom_pipeline_stage_id.
std::vector<std::pair<int64_t, int64_t>> custom_split_layers(const std::vector<int64_t>& stage_of_layer, int64_t layers,
                                                             int64_t stages);

}  // namespace mf::parallel
