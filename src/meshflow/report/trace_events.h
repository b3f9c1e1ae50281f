// The events of a trace.json (Chrome's trace-event format, as `train.profile` writes it) read into
// plain structs: spans, the ranks' names and stages, the run's pipeline description (otherData).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mf::report {

// A complete event ("ph":"X"). Times in microseconds from the trace's common start.
struct Span {
  int64_t pid = 0, tid = 0;  // pid: the world rank; tid 0: its main thread, 1..: communication
  std::string cat, name;
  double ts = 0, dur = 0;
  int64_t step = -1;         // "step" spans: args.step
  int64_t micro_batch = -1;  // "forward"/"backward": args.micro_batch
  int64_t chunk = -1;        // "forward"/"backward": args.chunk
  nlohmann::json args;       // all of them (an object; empty when absent)
  double end() const { return ts + dur; }
  double mid() const { return ts + dur / 2; }
};

struct TraceEvents {
  std::vector<Span> spans;                   // in the file's order
  std::map<int64_t, std::string> rank_name;  // process_name metadata: "rank 0 (stage 0, dp 0, tp 0)"
  std::map<int64_t, int64_t> rank_stage;     // the "stage N" of that name, where it says
  nlohmann::json other;                      // otherData (an object; empty when absent)
};

// Accepts the JSON object format ({"traceEvents": [...], "otherData": {...}}) and the bare array.
// Throws mf::Error naming the event index when an "X" event lacks a numeric ts, dur or pid.
TraceEvents read_trace_events(const nlohmann::json& trace);

}  // namespace mf::report
