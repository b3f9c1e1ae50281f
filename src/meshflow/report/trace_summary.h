// What the report reads from a trace: the pipeline bubble of each profiled step (measured per
// rank, beside the schedule's theoretical bubble) and the timeline of one step.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshflow/report/trace_events.h"

namespace mf::report {

// The idle fraction of a pipeline step with p stages and m micro-batches: (p-1)/(m+p-1) for
// "gpipe" and "1f1b", (p-1)/(v*m+p-1) for "interleaved_1f1b" with v chunks per rank. NaN for an
// unknown schedule or p, m < 1.
double theoretical_bubble(const std::string& schedule, int64_t stages, int64_t micro_batches, int64_t chunks);

// One rank in one step: the "schedule" span (the executor's run of the step's micro-batches) and
// the forward and backward spans inside it. bubble = 1 - compute_us / schedule_us.
struct RankBubble {
  int64_t rank = 0, stage = -1;  // stage -1: the trace does not say
  double schedule_us = 0, compute_us = 0, bubble = 0;
};

struct StepBubble {
  int64_t step = 0;
  std::vector<RankBubble> ranks;          // by rank
  std::map<int64_t, double> stage_bubble;  // mean over the ranks of each stage
  double mean = 0;                        // mean over the ranks
};

struct PipelineBubble {
  std::string schedule;  // otherData.pipeline_schedule, else the schedule span's name
  int64_t stages = 0, micro_batches = 0, chunks = 1;
  double theoretical = 0;        // theoretical_bubble of the above (NaN when unknown)
  std::vector<StepBubble> steps;  // each profiled step with "schedule" spans, by step
};

// The measured and theoretical bubble of a trace.json (its parsed JSON). A step is the "step"
// span of the same rank holding the schedule span (else the schedule spans' order from
// otherData.start_step). Empty `steps` when the trace has no "schedule" spans (no pipeline).
PipelineBubble pipeline_bubble(const nlohmann::json& trace);
PipelineBubble pipeline_bubble(const TraceEvents& events);

// The main-thread spans of the first profiled step on every rank, for a timeline: pipeline
// compute, waits, gradient synchronisation, the optimizer.
struct StepTimeline {
  int64_t step = -1;           // -1: the trace has no "step" spans (then: the whole trace)
  std::vector<int64_t> ranks;  // every rank with spans, ascending
  std::vector<Span> spans;     // ts relative to `start_us`
  double start_us = 0, end_us = 0;
};
StepTimeline first_step_timeline(const TraceEvents& events);

}  // namespace mf::report
