#include "meshflow/report/trace_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace mf::report {

namespace {

// The kinds of main-thread span the timeline shows.
const std::set<std::string> kTimelineCats = {"forward", "backward", "pipeline_wait", "comm_wait", "grad_sync",
                                             "optimizer"};

int64_t other_int(const TraceEvents& t, const char* key, int64_t fallback) {
  const auto it = t.other.find(key);
  return it != t.other.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

int64_t arg_int(const Span& s, const char* key, int64_t fallback) {
  const auto it = s.args.find(key);
  return it != s.args.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

// The "step" spans of each rank, to find the step a time of that rank falls in.
class StepIndex {
 public:
  explicit StepIndex(const TraceEvents& t) {
    for (const Span& s : t.spans)
      if (s.cat == "step") steps_[s.pid].push_back({s.ts, s.end(), number(s)});
  }
  // The step of the "step" span of rank `pid` holding time `at`, or -1.
  int64_t at(int64_t pid, double at) const {
    const auto it = steps_.find(pid);
    if (it == steps_.end()) return -1;
    for (const Entry& e : it->second)
      if (e.start <= at && at <= e.end) return e.step;
    return -1;
  }
  // The smallest step number, or -1.
  int64_t first() const {
    int64_t first = -1;
    for (const auto& [pid, entries] : steps_)
      for (const Entry& e : entries)
        if (e.step >= 0 && (first < 0 || e.step < first)) first = e.step;
    return first;
  }

 private:
  struct Entry {
    double start, end;
    int64_t step;
  };
  // args.step, else the number in the name ("step 7"), else -1.
  static int64_t number(const Span& s) {
    if (s.step >= 0) return s.step;
    const size_t sp = s.name.find(' ');
    if (sp == std::string::npos) return -1;
    try {
      return std::stoll(s.name.substr(sp + 1));
    } catch (const std::exception&) {
      return -1;
    }
  }
  std::map<int64_t, std::vector<Entry>> steps_;
};

}  // namespace

double theoretical_bubble(const std::string& schedule, int64_t p, int64_t m, int64_t v) {
  if (p < 1 || m < 1) return std::numeric_limits<double>::quiet_NaN();
  const double pd = static_cast<double>(p), md = static_cast<double>(m);
  if (schedule == "gpipe" || schedule == "1f1b") return (pd - 1) / (md + pd - 1);
  if (schedule == "interleaved_1f1b") return (pd - 1) / (static_cast<double>(std::max<int64_t>(v, 1)) * md + pd - 1);
  return std::numeric_limits<double>::quiet_NaN();
}

PipelineBubble pipeline_bubble(const nlohmann::json& trace) { return pipeline_bubble(read_trace_events(trace)); }

PipelineBubble pipeline_bubble(const TraceEvents& t) {
  PipelineBubble out;
  const Span* first_schedule = nullptr;
  for (const Span& s : t.spans)
    if (s.cat == "schedule") {
      first_schedule = &s;
      break;
    }
  const auto other_schedule = t.other.find("pipeline_schedule");
  if (other_schedule != t.other.end() && other_schedule->is_string()) out.schedule = other_schedule->get<std::string>();
  else if (first_schedule && first_schedule->name.rfind("pipeline ", 0) == 0) out.schedule = first_schedule->name.substr(9);
  out.stages = other_int(t, "pipeline_stages", first_schedule ? arg_int(*first_schedule, "stages", 0) : 0);
  out.micro_batches = other_int(t, "micro_batches", first_schedule ? arg_int(*first_schedule, "micro_batches", 0) : 0);
  out.chunks = other_int(t, "virtual_stages", first_schedule ? arg_int(*first_schedule, "chunks", 1) : 1);
  out.theoretical = theoretical_bubble(out.schedule, out.stages, out.micro_batches, out.chunks);

  // Each rank's schedule spans in order, then each one's step and the compute inside it.
  std::map<int64_t, std::vector<RankBubble>> by_step;
  std::map<int64_t, int64_t> seen;  // schedule spans met so far per rank
  const int64_t start_step = other_int(t, "start_step", 0);
  const StepIndex steps(t);
  for (const Span& s : t.spans) {
    if (s.cat != "schedule") continue;
    int64_t step = steps.at(s.pid, s.mid());
    const int64_t index = seen[s.pid]++;
    if (step < 0) step = start_step + index;
    RankBubble r;
    r.rank = s.pid;
    const auto stage = t.rank_stage.find(s.pid);
    r.stage = stage == t.rank_stage.end() ? -1 : stage->second;
    r.schedule_us = s.dur;
    for (const Span& c : t.spans)
      if ((c.cat == "forward" || c.cat == "backward") && c.pid == s.pid && c.tid == s.tid && s.ts <= c.mid() &&
          c.mid() <= s.end())
        r.compute_us += c.dur;
    r.bubble = s.dur > 0 ? 1 - r.compute_us / s.dur : 0;
    by_step[step].push_back(r);
  }
  for (auto& [step, ranks] : by_step) {
    StepBubble b;
    b.step = step;
    std::sort(ranks.begin(), ranks.end(), [](const RankBubble& a, const RankBubble& c) { return a.rank < c.rank; });
    b.ranks = ranks;
    std::map<int64_t, std::pair<double, int>> stage_sum;
    double sum = 0;
    for (const RankBubble& r : ranks) {
      sum += r.bubble;
      auto& [s, n] = stage_sum[r.stage];
      s += r.bubble;
      ++n;
    }
    b.mean = ranks.empty() ? 0 : sum / static_cast<double>(ranks.size());
    for (const auto& [stage, sn] : stage_sum) b.stage_bubble[stage] = sn.first / sn.second;
    out.steps.push_back(std::move(b));
  }
  return out;
}

StepTimeline first_step_timeline(const TraceEvents& t) {
  StepTimeline out;
  const StepIndex steps(t);
  out.step = steps.first();
  // The window: from the first rank's start of that step to the last rank's end of it.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::set<int64_t> ranks;
  for (const Span& s : t.spans) {
    ranks.insert(s.pid);
    if (out.step < 0 || (s.cat == "step" && steps.at(s.pid, s.mid()) == out.step)) {
      lo = std::min(lo, s.ts);
      hi = std::max(hi, s.end());
    }
  }
  out.ranks.assign(ranks.begin(), ranks.end());
  if (!(hi >= lo)) return out;
  out.start_us = 0;
  out.end_us = hi - lo;
  for (const Span& s : t.spans) {
    if (s.tid != 0 || !kTimelineCats.count(s.cat) || s.mid() < lo || s.mid() > hi) continue;
    if (out.step >= 0 && steps.at(s.pid, s.mid()) != out.step) continue;
    Span r = s;
    r.ts -= lo;
    out.spans.push_back(std::move(r));
  }
  return out;
}

}  // namespace mf::report
