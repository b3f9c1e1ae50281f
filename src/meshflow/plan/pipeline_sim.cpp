#include "meshflow/plan/pipeline_sim.h"

#include <algorithm>
#include <limits>

#include "meshflow/core/error.h"

namespace mf::plan {

namespace {

double simulate(const PipelineRun& r) {
  const int64_t p = r.stages, v = r.chunks, m = r.micro_batches;
  MF_CHECK(p >= 1 && v >= 1 && m >= 1, "simulate_pipeline: stages ", p, ", chunks ", v, ", micro-batches ", m);
  MF_CHECK(static_cast<int64_t>(r.forward_s.size()) == p && static_cast<int64_t>(r.backward_s.size()) == p,
           "simulate_pipeline: seconds for ", r.forward_s.size(), " and ", r.backward_s.size(), " ranks, not ", p);
  for (int64_t s = 0; s < p; ++s)
    MF_CHECK(static_cast<int64_t>(r.forward_s[s].size()) == v && static_cast<int64_t>(r.backward_s[s].size()) == v,
             "simulate_pipeline: rank ", s, " needs seconds for ", v, " chunks");
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const int64_t virtual_stages = v * p;
  // When each (virtual stage, micro-batch) finished its forward and its backward.
  std::vector<double> forward_done(static_cast<size_t>(virtual_stages * m), kNever);
  std::vector<double> backward_done(static_cast<size_t>(virtual_stages * m), kNever);
  auto at = [&](int64_t j, int64_t micro) { return static_cast<size_t>(j * m + micro); };
  struct Rank {
    std::vector<parallel::PipelineAction> actions;
    size_t next = 0;
    bool running = false;
    double left = 0;  // seconds of the running action at the rank's own rate
  };
  std::vector<Rank> ranks(static_cast<size_t>(p));
  for (int64_t s = 0; s < p; ++s) ranks[static_cast<size_t>(s)].actions = parallel::pipeline_actions(r.schedule, p, s, m, v);
  // When the input of rank s's next action arrived (kNever: not yet sent).
  auto input_ready = [&](int64_t s) {
    const parallel::PipelineAction& a = ranks[static_cast<size_t>(s)].actions[ranks[static_cast<size_t>(s)].next];
    const int64_t j = a.chunk * p + s;
    if (a.forward) return j == 0 ? 0.0 : forward_done[at(j - 1, a.micro)];
    return j == virtual_stages - 1 ? forward_done[at(j, a.micro)] : backward_done[at(j + 1, a.micro)];
  };
  auto seconds = [&](int64_t s, const parallel::PipelineAction& a) {
    return (a.forward ? r.forward_s : r.backward_s)[static_cast<size_t>(s)][static_cast<size_t>(a.chunk)];
  };
  auto finish = [&](int64_t s, double when) {
    Rank& k = ranks[static_cast<size_t>(s)];
    const parallel::PipelineAction& a = k.actions[k.next];
    (a.forward ? forward_done : backward_done)[at(a.chunk * p + s, a.micro)] = when;
    ++k.next;
  };
  if (r.capacity <= 0) {
    // Cores of their own: an action starts when both its rank and its input are free — sweep the
    // ranks, each as far as its inputs are known (a schedule's sweeps always advance).
    std::vector<double> free_at(static_cast<size_t>(p), 0.0);
    double end = 0;
    for (bool advanced = true; advanced;) {
      advanced = false;
      for (int64_t s = 0; s < p; ++s) {
        Rank& k = ranks[static_cast<size_t>(s)];
        while (k.next < k.actions.size()) {
          const double ready = input_ready(s);
          if (ready == kNever) break;
          const double done = std::max(free_at[static_cast<size_t>(s)], ready) + seconds(s, k.actions[k.next]);
          free_at[static_cast<size_t>(s)] = done;
          end = std::max(end, done);
          finish(s, done);
          advanced = true;
        }
      }
    }
    for (const Rank& k : ranks) MF_CHECK(k.next == k.actions.size(), "simulate_pipeline: the schedule deadlocks");
    return end;
  }
  const double all = static_cast<double>(p) * r.processes_per_stage;
  double now = 0;
  for (;;) {
    int64_t busy = 0, unfinished = 0;
    double next_ready = kNever;
    for (int64_t s = 0; s < p; ++s) {
      Rank& k = ranks[static_cast<size_t>(s)];
      if (k.next == k.actions.size()) continue;
      ++unfinished;
      if (!k.running) {
        const double ready = input_ready(s);
        if (ready <= now) {
          k.running = true;
          k.left = seconds(s, k.actions[k.next]);
        } else {
          next_ready = std::min(next_ready, ready);
        }
      }
      busy += k.running ? 1 : 0;
    }
    if (unfinished == 0) break;
    MF_CHECK(busy > 0 || next_ready < kNever, "simulate_pipeline: the schedule deadlocks at ", now, " s");
    // Each busy process's speed (1: its own rate): the capacity the waiting ones leave, shared.
    double speed = 1;
    if (r.capacity > 0 && busy > 0) {
      const double computing = static_cast<double>(busy) * r.processes_per_stage;
      const double left_over = std::max(r.capacity - r.waiting_load * (all - computing), 1e-3 * r.capacity);
      speed = std::min(1.0, left_over / computing);
    }
    double step = next_ready - now;
    for (const Rank& k : ranks)
      if (k.running) step = std::min(step, k.left / speed);
    now += step;
    for (int64_t s = 0; s < p; ++s) {
      Rank& k = ranks[static_cast<size_t>(s)];
      if (!k.running) continue;
      k.left -= step * speed;
      if (k.left > 1e-9 * step * speed + 1e-15) continue;  // (rounding: the action ending now may keep a crumb)
      k.running = false;
      finish(s, now);
    }
  }
  return now;
}

}  // namespace

double simulate_pipeline(const PipelineRun& r) {
  // Past the fill the schedules repeat: each group of `stages` micro-batches adds the same time
  // (the slowest stage's, or the shared cores'). Many micro-batches (a large cluster's global
  // batch) are extrapolated from 2p and 3p — multiples of p, as interleaving needs.
  const int64_t p = r.stages, m = r.micro_batches;
  if (m <= 4 * p) return simulate(r);
  PipelineRun few = r;
  few.micro_batches = 2 * p;
  const double two = simulate(few);
  few.micro_batches = 3 * p;
  const double three = simulate(few);
  return three + static_cast<double>(m - 3 * p) * (three - two) / static_cast<double>(p);
}

}  // namespace mf::plan
