#include "meshflow/plan/run.h"

#include <nlohmann/json.hpp>

#include <map>

#include "meshflow/core/error.h"
#include "meshflow/plan/planner.h"
#include "meshflow/tensor/tensor.h"

namespace mf::plan {

namespace {

nlohmann::ordered_json plan_json(const Plan& p, int64_t rank, int64_t num_layers) {
  nlohmann::ordered_json keys = nlohmann::ordered_json::object();
  for (const auto& [k, v] : p.layout.config_keys(num_layers)) keys[k] = v;
  return {{"rank", rank},
          {"layout", p.layout.str()},
          {"keys", keys},
          {"step_s", p.time.total()},
          {"tokens_per_s", p.tokens_per_s},
          {"mfu", p.mfu},
          {"memory",
           {{"peak", p.memory.peak},
            {"parameters", p.memory.parameters},
            {"gradients", p.memory.gradients},
            {"optimizer_state", p.memory.optimizer_state},
            {"activations", p.memory.activations},
            {"stage", p.memory.stage}}},
          {"time",
           {{"compute_s", p.time.compute_s},
            {"bubble_s", p.time.bubble_s},
            {"tp_comm_s", p.time.tp_comm_s},
            {"pp_comm_s", p.time.pp_comm_s},
            {"dp_comm_s", p.time.dp_comm_s},
            {"optimizer_s", p.time.optimizer_s}}}};
}

// Why no plan is left: the rejection reasons, counted.
std::string no_plan(const PlanResult& r) {
  std::map<std::string, int64_t> reasons;
  for (const Rejected& x : r.rejected) ++reasons[x.reason.rfind("memory", 0) == 0 ? "memory" : x.reason];
  std::string s;
  int shown = 0;
  for (const auto& [k, v] : reasons)
    if (shown++ < 4) s += detail::cat(s.empty() ? "" : "; ", k, " (", v, " layouts)");
  return detail::cat("no layout of ", r.model_line, " fits on ", r.ranks, " ranks with ",
                     r.memory_limit / 1e9, " GB each: ", s);
}

}  // namespace

int run_plan(const Config& c, const PlanArgs& a, std::FILE* out) {
  PlanOptions o = plan_options(c, a.nproc);
  if (a.memory_per_rank_gb > 0) o.memory_per_rank_bytes = a.memory_per_rank_gb * 1e9;
  if (!a.hardware.empty()) o.hardware = a.hardware;
  const PlanResult r = make_plan(c, o);
  if (a.json) {
    for (size_t i = 0; i < r.ranked.size(); ++i)
      std::fprintf(out, "%s\n", plan_json(r.ranked[i], static_cast<int64_t>(i) + 1, r.model.layers).dump().c_str());
    return r.ranked.empty() ? 1 : 0;
  }
  std::fputs(plan_report(r, a.top, a.rejected).c_str(), out);
  if (r.ranked.empty()) {
    std::fflush(out);
    MF_THROW(no_plan(r));
  }
  std::fprintf(out, "best: %s\n", layout_overrides(r.ranked.front().layout, r.model.layers).c_str());
  return 0;
}

Config auto_parallel(const Config& c, const comm::CommPtr& world, std::FILE* out) {
  if (!c.get_bool("graph.auto_parallel.enabled")) return c;
  const int64_t ranks = world ? world->size() : 1;
  const bool leader = !world || world->rank() == 0;
  // Rank 0 plans (the host profile measures this process); every rank takes its layout, broadcast
  // as numbers (the first 1 when rank 0 found one).
  Layout chosen;
  ModelCosts m = model_costs(c);
  std::vector<double> code(12, 0.0);
  std::string error;
  if (leader) {
    try {
      const PlanResult r = make_plan(c, plan_options(c, ranks));
      if (r.ranked.empty()) {
        error = no_plan(r);
      } else {
        const Plan& p = r.ranked.front();
        const Layout& l = p.layout;
        code = {1.0, double(l.dp), double(l.tp), double(l.pp), l.schedule == "gpipe" ? 1.0 : l.schedule == "interleaved_1f1b" ? 2.0 : 0.0,
                double(l.virtual_stages), l.sequence_parallel ? 1.0 : 0.0, double(l.zero_stage), double(l.micro_batch),
                double(l.accumulation), double(static_cast<int>(l.recompute)), double(l.recompute_layers)};
        std::fprintf(out, "auto_parallel: %s, the best of %zu feasible layouts on %lld ranks (%zu rejected): predicted "
                     "%.1f tokens/s, MFU %.1f%%, peak %.3f GB per rank on %s\nauto_parallel: %s\n",
                     l.str().c_str(), r.ranked.size(), static_cast<long long>(ranks), r.rejected.size(), p.tokens_per_s,
                     100 * p.mfu, p.memory.peak / 1e9, r.hardware.name.c_str(), layout_overrides(l, m.layers).c_str());
        std::fflush(out);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty() && (!world || ranks == 1)) MF_THROW("graph.auto_parallel: ", error);
  }
  if (world && ranks > 1) {
    Tensor t = from_vector(code, {static_cast<int64_t>(code.size())});
    world->broadcast(t, 0)->wait();
    const double* v = t.data<double>();
    MF_CHECK(v[0] == 1.0, "graph.auto_parallel: ", error.empty() ? "rank 0 found no layout (see its message)" : error);
    code.assign(v, v + code.size());
  }
  chosen.dp = static_cast<int64_t>(code[1]);
  chosen.tp = static_cast<int64_t>(code[2]);
  chosen.pp = static_cast<int64_t>(code[3]);
  chosen.schedule = code[4] == 1.0 ? "gpipe" : code[4] == 2.0 ? "interleaved_1f1b" : "1f1b";
  chosen.virtual_stages = static_cast<int64_t>(code[5]);
  chosen.sequence_parallel = code[6] == 1.0;
  chosen.zero_stage = static_cast<int64_t>(code[7]);
  chosen.micro_batch = static_cast<int64_t>(code[8]);
  chosen.accumulation = static_cast<int64_t>(code[9]);
  chosen.recompute = static_cast<Recompute>(static_cast<int>(code[10]));
  chosen.recompute_layers = static_cast<int64_t>(code[11]);
  return apply_plan(c, m, chosen);
}

}  // namespace mf::plan
