#include "meshflow/report/figures.h"

#include <algorithm>
#include <cmath>

#include "meshflow/report/bar_chart.h"
#include "meshflow/report/line_chart.h"
#include "meshflow/report/timeline.h"

namespace mf::report {

namespace {

constexpr double kGB = 1e9;  // bytes per GB, as the training log prints them

bool has_values(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// A training-line field over steps, scaled.
Series train_series(const RunFiles& run, double TrainPoint::*field, double scale = 1) {
  Series s;
  for (const TrainPoint& p : run.metrics.train) {
    s.x.push_back(static_cast<double>(p.step));
    s.y.push_back(p.*field * scale);
  }
  return s;
}

Series eval_series(const RunFiles& run, const std::string& key) {
  Series s;
  for (const EvalPoint& e : run.metrics.eval) {
    const auto it = e.values.find(key);
    if (it == e.values.end()) continue;
    s.x.push_back(static_cast<double>(e.step));
    s.y.push_back(it->second);
  }
  return s;
}

// A chart of one training field, a series per run (legend: the run folders' names).
Figure field_figure(const std::vector<RunFiles>& runs, const std::string& id, const std::string& title,
                    const std::string& y_label, double TrainPoint::*field, double scale, const std::string& caption) {
  LineChart c{title, "step", y_label, false, {}};
  bool any = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s = train_series(runs[i], field, scale);
    s.name = runs[i].name;
    s.color = palette(i);
    any = any || has_values(s.y);
    c.series.push_back(std::move(s));
  }
  // A log axis when the values span more than two decades (gradient norms early in training).
  double lo = INFINITY, hi = 0;
  for (const Series& s : c.series)
    for (double y : s.y)
      if (std::isfinite(y) && y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
  c.log_y = hi > 0 && hi / lo > 100;
  if (c.log_y) c.y_label += " (log scale)";
  return any ? Figure{id, caption, render_line_chart(c)} : Figure{};
}

Figure loss_figure(const std::vector<RunFiles>& runs) {
  LineChart c{"Loss", "step", "loss", false, {}};
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    Series train = train_series(runs[i], &TrainPoint::loss);
    train.name = several ? runs[i].name + " training" : "training loss (mean over the log period)";
    train.color = palette(several ? i : 0);
    Series val = eval_series(runs[i], "val_loss");
    val.name = several ? runs[i].name + " validation" : "validation loss";
    val.color = palette(several ? i : 1);
    val.dashed = true;
    c.series.push_back(std::move(train));
    if (!val.x.empty()) c.series.push_back(std::move(val));
  }
  return Figure{"loss", "Training loss (solid) and validation loss (dashed) over steps, from metrics.jsonl.",
                render_line_chart(c)};
}

// One run's ranks from its last training line: "ranks", else rank 0's top-level figures.
struct RankRows {
  std::vector<RankMetrics> ranks;
  std::vector<std::string> names;
  int64_t step = 0;
  bool per_rank = false;
};

RankRows rank_rows(const RunFiles& run) {
  RankRows r;
  if (run.metrics.train.empty()) return r;
  const TrainPoint& last = run.metrics.train.back();
  r.step = last.step;
  r.per_rank = !last.ranks.empty();
  r.ranks = r.per_rank ? last.ranks : std::vector<RankMetrics>{last.rank0};
  for (const RankMetrics& m : r.ranks) {
    std::string name = "rank " + std::to_string(m.rank);
    if (m.stage >= 0) {  // "rank 3 (stage 1, dp 0, tp 1)"
      name += " (stage " + std::to_string(m.stage);
      for (size_t i = 0; i < m.coordinate.size() && i < global::dim_specs().size(); ++i)
        if (std::string_view(global::dim_specs()[i].name) != "pp")
          name += ", " + std::string(global::dim_specs()[i].name) + " " + std::to_string(m.coordinate[i]);
      name += ")";
    }
    r.names.push_back(std::move(name));
  }
  return r;
}

double nan_as_zero(double v) { return std::isfinite(v) ? v : 0; }

std::string source_note(const RankRows& r) {
  return r.per_rank ? " From the last training line's \"ranks\" (step " + std::to_string(r.step) + ")."
                    : " No per-rank data in metrics.jsonl (a run from before \"ranks\" was logged): rank 0's figures "
                      "from the last training line (step " + std::to_string(r.step) + ").";
}

}  // namespace

std::vector<Figure> curve_figures(const std::vector<RunFiles>& runs) {
  std::vector<Figure> out;
  out.push_back(loss_figure(runs));
  out.push_back(field_figure(runs, "lr", "Learning rate", "learning rate", &TrainPoint::lr, 1,
                             "The learning rate at each logged step."));
  out.push_back(field_figure(runs, "grad_norm", "Gradient norm", "gradient norm", &TrainPoint::grad_norm, 1,
                             "The global gradient norm (L2) at each logged step."));
  out.push_back(field_figure(runs, "tokens_per_sec", "Throughput", "tokens/s", &TrainPoint::tokens_per_sec, 1,
                             "Training tokens per second, over each log period (all ranks together)."));
  out.push_back(field_figure(runs, "mfu", "Model FLOPs utilisation", "MFU (%)", &TrainPoint::mfu, 100,
                             "Model FLOPs per second over the devices' peak, over each log period (0 when the "
                             "peak is unknown)."));
  out.erase(std::remove_if(out.begin(), out.end(), [](const Figure& f) { return f.svg.empty(); }), out.end());
  return out;
}

std::vector<Figure> rank_figures(const RunFiles& run, const std::string& prefix) {
  const RankRows r = rank_rows(run);
  if (r.ranks.empty()) return {};
  // GB (10^9 bytes, as the training log prints), or MB when every rank holds under 0.1 GB.
  double peak = 0;
  for (const RankMetrics& m : r.ranks)
    peak = std::max(peak, nan_as_zero(m.mem_parameters) + nan_as_zero(m.mem_gradients) +
                              nan_as_zero(m.mem_optimizer_state) + nan_as_zero(m.mem_activations));
  const bool mb = peak < 0.1 * kGB;
  const double unit = mb ? kGB / 1e3 : kGB;
  const std::string unit_name = mb ? "MB" : "GB";
  StackedBars mem{"Memory per rank (" + unit_name + ")", "rank", "memory (" + unit_name + ")", r.names, {}, true};
  // A part of each rank's bar: value(rank) / unit.
  const auto part = [&](const std::string& name, size_t color, double unit, auto value) {
    BarPart p{name, palette(color), {}};
    for (const RankMetrics& m : r.ranks) p.values.push_back(value(m) / unit);
    return p;
  };
  mem.parts = {part("parameters", 0, unit, [](const RankMetrics& m) { return nan_as_zero(m.mem_parameters); }),
               part("gradients", 1, unit, [](const RankMetrics& m) { return nan_as_zero(m.mem_gradients); }),
               part("optimizer state", 2, unit, [](const RankMetrics& m) { return nan_as_zero(m.mem_optimizer_state); }),
               part("activations and workspace (excluding comm buffers)", 4, unit,
                    [](const RankMetrics& m) {
                      return std::max(0.0, nan_as_zero(m.mem_activations) - nan_as_zero(m.mem_comm_buffers));
                    }),
               part("communication buffers", 3, unit, [](const RankMetrics& m) { return nan_as_zero(m.mem_comm_buffers); })};
  StackedBars time{"Step time per rank (s)", "rank", "step time (s)", r.names, {}, false};
  time.parts = {
      part("compute and other", 0, 1,
           [](const RankMetrics& m) {
             return std::max(0.0, nan_as_zero(m.step_time) - nan_as_zero(m.pipeline_wait_time) -
                                      nan_as_zero(m.exposed_comm_time));
           }),
      part("pipeline wait", 7, 1, [](const RankMetrics& m) { return nan_as_zero(m.pipeline_wait_time); }),
      part("exposed communication", 3, 1, [](const RankMetrics& m) { return nan_as_zero(m.exposed_comm_time); })};
  return {Figure{prefix + "memory",
                 "Each rank's memory by kind (" + unit_name + " = 10^" + (mb ? "6" : "9") + " bytes); a bar sums to the allocator's peak in the step "
                 "(parameters, gradients and optimizer state, plus activations and workspace)." + source_note(r),
                 render_stacked_bars(mem)},
          Figure{prefix + "step_time",
                 "Each rank's step time split into waiting for a pipeline neighbour, gradient communication not "
                 "hidden behind backward, and the rest." + source_note(r),
                 render_stacked_bars(time)}};
}

Figure timeline_figure(const TraceEvents& events, const std::string& prefix) {
  const StepTimeline st = first_step_timeline(events);
  Timeline t;
  t.title = st.step >= 0 ? "Pipeline timeline of step " + std::to_string(st.step) : "Timeline of the trace";
  t.x_label = "time since the step began (ms)";
  t.kinds = {{"forward", palette(0)},
             {"backward", palette(1)},
             {"pipeline wait", "#a0a0a0"},
             {"collective wait (strip)", palette(3), true},
             {"grad sync", palette(2)},
             {"optimizer", palette(4)}};
  const std::vector<std::string> cats = {"forward", "backward", "pipeline_wait", "comm_wait", "grad_sync", "optimizer"};
  for (int64_t rank : st.ranks) {
    const auto it = events.rank_name.find(rank);
    t.rows.push_back(it != events.rank_name.end() ? it->second : "rank " + std::to_string(rank));
  }
  // Longer spans first, so that spans nested in them (a wait inside grad sync) are drawn on top.
  std::vector<Span> spans = st.spans;
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.dur > b.dur; });
  for (const Span& s : spans) {
    TimelineBar b;
    b.row = static_cast<size_t>(std::lower_bound(st.ranks.begin(), st.ranks.end(), s.pid) - st.ranks.begin());
    b.kind = static_cast<size_t>(std::find(cats.begin(), cats.end(), s.cat) - cats.begin());
    b.start = s.ts / 1e3;
    b.end = s.end() / 1e3;
    if (s.micro_batch >= 0) b.label = std::to_string(s.micro_batch) + (s.chunk > 0 ? "c" + std::to_string(s.chunk) : "");
    b.tooltip = t.rows[b.row] + ": " + s.name + (s.micro_batch >= 0 ? ", micro-batch " + std::to_string(s.micro_batch) : "") +
                (s.chunk >= 0 ? ", chunk " + std::to_string(s.chunk) : "") + ", " + format_value(s.dur / 1e3) + " ms";
    t.bars.push_back(std::move(b));
  }
  return Figure{prefix + "timeline",
                "The main thread of each rank in the first profiled step, from trace.json: forward and backward "
                "of each micro-batch (labelled with its number), waits for a pipeline neighbour, gradient "
                "synchronisation and the optimizer; the strip along the bottom of a row marks waits for a "
                "collective (inside the others: tensor-parallel all-reduces in forward and backward, "
                "pipeline receives, gradient reductions).",
                render_timeline(t, Layout{1100, 320})};
}

}  // namespace mf::report
