#include "meshflow/plan/planner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "meshflow/core/error.h"
#include "meshflow/models/registry.h"
#include "meshflow/runtime/build.h"

namespace mf::plan {

PlanOptions plan_options(const Config& c, int64_t ranks) {
  PlanOptions o;
  o.ranks = ranks;
  o.memory_per_rank_bytes = c.get_float("graph.auto_parallel.memory_per_rank_gb") * 1e9;
  o.hardware = c.get_string("graph.auto_parallel.hardware");
  return o;
}

PlanResult make_plan(const Config& c, const PlanOptions& o) {
  PlanResult r;
  r.model = model_costs(c);
  const models::ModelSpec& spec = models::model_spec(r.model.name);
  r.model_line = spec.describe ? spec.describe(c) : r.model.name;
  r.hardware = o.profile ? *o.profile : hardware_profile(o.hardware, o.ranks);
  r.model.set_runtime(r.hardware);
  r.ranks = o.ranks;
  r.global_batch = planned_global_batch(c, o.ranks);
  r.memory_limit = o.memory_per_rank_bytes > 0 ? o.memory_per_rank_bytes : r.hardware.memory_bytes;
  Candidates cand = enumerate_layouts(c, r.model, o.ranks);
  r.rejected = std::move(cand.rejected);
  // The layer split of each (pp, chunks, micro-batch): the one the run makes.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> splits;
  const double tokens_per_step = static_cast<double>(r.global_batch * r.model.seq);
  for (const Layout& l : cand.feasible) {
    Plan p;
    p.layout = l;
    auto key = std::make_tuple(l.pp(), l.virtual_stages, l.micro_batch);
    auto it = splits.find(key);
    try {
      if (it == splits.end()) it = splits.emplace(key, stage_layers(c, r.model, l)).first;
      p.memory = estimate_memory(r.model, l, it->second);
    } catch (const Error& e) {  // the run's own checks (a pipeline the schedule cannot make)
      r.rejected.push_back({l, e.what()});
      continue;
    }
    if (p.memory.peak > r.memory_limit) {
      r.rejected.push_back({l, detail::cat("memory: ", p.memory.peak / 1e9, " GB per rank > ", r.memory_limit / 1e9, " GB")});
      continue;
    }
    p.time = estimate_step_time(r.model, l, r.hardware, it->second);
    p.tokens_per_s = tokens_per_step / p.time.total();
    p.mfu = p.tokens_per_s * r.model.train_flops_per_token() / (r.hardware.peak_flops * static_cast<double>(o.ranks));
    r.ranked.push_back(p);
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Plan& a, const Plan& b) {
    if (a.time.total() != b.time.total()) return a.time.total() < b.time.total();
    return a.memory.peak < b.memory.peak;
  });
  return r;
}

namespace {
std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}
}  // namespace

std::string plan_report(const PlanResult& r, int64_t top, bool rejected) {
  std::string out = detail::cat("plan: ", r.model_line, " (",
                                fmt("%.1f", static_cast<double>(r.model.total_params()) / 1e6), "M parameters, ",
                                r.model.layers, " layers) on ", r.ranks, " ranks; global batch ", r.global_batch,
                                " x ", r.model.seq, " tokens; hardware ", r.hardware.name, " (peak ",
                                fmt("%.4g", r.hardware.peak_flops / 1e9), " GFLOP/s per rank; ", r.hardware.source,
                                "); memory per rank ", fmt("%.3g", r.memory_limit / 1e9), " GB\n");
  out += detail::cat(r.ranked.size(), " feasible layouts, ", r.rejected.size(), " rejected\n");
  char line[512];
  std::snprintf(line, sizeof line, "%4s  %-46s %9s %10s %6s %8s  %s\n", "rank", "layout", "step s", "tokens/s", "MFU",
                "peak GB", "params/grads/optim/activations GB; compute/bubble/tp/pp/cp/dp/optim s");
  out += line;
  const size_t n = top > 0 ? std::min(r.ranked.size(), static_cast<size_t>(top)) : r.ranked.size();
  for (size_t i = 0; i < n; ++i) {
    const Plan& p = r.ranked[i];
    const MemoryEstimate& m = p.memory;
    const StepTime& t = p.time;
    std::snprintf(line, sizeof line, "%4zu  %-46s %9.4f %10.1f %5.1f%% %8.3f  %.3f/%.3f/%.3f/%.3f; %.3f/%.3f/%.3f/%.3f/%.3f/%.3f/%.3f\n",
                  i + 1, p.layout.str().c_str(), t.total(), p.tokens_per_s, 100 * p.mfu, m.peak / 1e9, m.parameters / 1e9,
                  m.gradients / 1e9, m.optimizer_state / 1e9, m.activations / 1e9, t.compute_s, t.bubble_s, t.tp_comm_s,
                  t.pp_comm_s, t.cp_comm_s, t.dp_comm_s, t.optimizer_s);
    out += line;
  }
  if (n < r.ranked.size()) out += detail::cat("... ", r.ranked.size() - n, " more (--top 0: all)\n");
  // Reasons by kind: their numbers as N ("N pipeline stages for N layers").
  std::map<std::string, int64_t> reasons;
  for (const Rejected& x : r.rejected) {
    std::string kind;
    const std::string text = x.reason.rfind("memory", 0) == 0 ? std::string("memory") : x.reason;
    for (size_t i = 0; i < text.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(text[i])) && (i == 0 || !(std::isalpha(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_'))) {
        while (i + 1 < text.size() && (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '.')) ++i;
        kind += 'N';
      } else {
        kind += text[i];
      }
    }
    ++reasons[kind];
  }
  if (!reasons.empty()) {
    out += "rejected:";
    for (const auto& [k, v] : reasons) out += detail::cat(" ", k, " (", v, ");");
    out.back() = '\n';
  }
  if (rejected)
    for (const Rejected& x : r.rejected) out += detail::cat("  ", x.layout.str(), ": ", x.reason, "\n");
  return out;
}

Config apply_plan(const Config& c, const ModelCosts& m, const Layout& l) {
  Config out = with_layout(c, m, l);
  out.set("graph.auto_parallel.enabled", "false", "plan");
  return out;
}

std::string layout_overrides(const Layout& l, int64_t num_layers) {
  std::string s;
  for (const auto& [k, v] : l.config_keys(num_layers)) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

}  // namespace mf::plan
