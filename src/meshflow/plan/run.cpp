#include "meshflow/plan/run.h"

#include <nlohmann/json.hpp>

#include <map>

#include "meshflow/core/error.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/plan/measure.h"
#include "meshflow/plan/planner.h"

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
            {"cp_comm_s", p.time.cp_comm_s},
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
  if (r.rejected.empty())  // the user's layout keys left no candidate at all
    return detail::cat("no layout of ", r.model_line, " on ", r.ranks, " ranks keeps the layout keys the config sets "
                       "to other than their defaults (kept as given: train.dist.*_size, the batch sizes, ZeRO, "
                       "recomputation); the ranks must be data x tensor x pipeline parallel sizes");
  return detail::cat("no layout of ", r.model_line, " fits on ", r.ranks, " ranks with ",
                     r.memory_limit / 1e9, " GB each: ", s);
}

}  // namespace

int run_plan(const Config& c, const PlanArgs& a, std::FILE* out, const comm::CommPtr& world) {
  PlanOptions o = plan_options(c, a.nproc);
  if (a.memory_per_rank_gb > 0) o.memory_per_rank_bytes = a.memory_per_rank_gb * 1e9;
  if (!a.hardware.empty()) o.hardware = a.hardware;
  const bool leader = !world || world->rank() == 0;
  if (a.measure >= 0) {
    // The same ranking on every rank: rank 0's profile (the host's is measured in the process).
    std::string profile = leader ? profile_json(hardware_profile(o.hardware, o.ranks)) : std::string();
    o.profile = parse_profile(parallel::text_from_rank0(world.get(), profile), "rank 0's profile");
  } else if (!leader) {
    return 0;
  }
  const PlanResult r = make_plan(c, o);
  if (a.json && a.measure < 0) {
    for (size_t i = 0; i < r.ranked.size(); ++i)
      std::fprintf(out, "%s\n", plan_json(r.ranked[i], static_cast<int64_t>(i) + 1, r.model.layers).dump().c_str());
    return r.ranked.empty() ? 1 : 0;
  }
  if (leader && !a.json) std::fputs(plan_report(r, a.top, a.rejected).c_str(), out);
  if (r.ranked.empty()) {
    std::fflush(out);
    MF_THROW(no_plan(r));
  }
  if (leader && !a.json) std::fprintf(out, "best: %s\n", layout_overrides(r.ranked.front().layout, r.model.layers).c_str());
  if (a.measure >= 0) {
    std::fflush(out);
    MeasureOptions mo;
    mo.plans = a.measure;
    mo.steps = a.steps;
    mo.json = a.json;
    mo.skip = a.skip;
    mo.train = a.train;
    measure_plans(c, r, mo, world, out);
  }
  return 0;
}

Config auto_parallel(const Config& c, const comm::CommPtr& world, std::FILE* out) {
  if (!c.get_bool("graph.auto_parallel.enabled")) return c;
  const int64_t ranks = world ? world->size() : 1;
  const bool leader = !world || world->rank() == 0;
  // Rank 0 plans (the host profile measures this process) and sends every rank its choice as its
  // key=value line, or "error: " and why none.
  std::string line;
  if (leader) {
    try {
      const PlanResult r = make_plan(c, plan_options(c, ranks));
      if (r.ranked.empty()) {
        line = "error: " + no_plan(r);
      } else {
        const Plan& p = r.ranked.front();
        line = layout_overrides(p.layout, r.model.layers);
        std::fprintf(out, "auto_parallel: %s, the best of %zu feasible layouts on %lld ranks (%zu rejected): predicted "
                     "%.1f tokens/s, MFU %.1f%%, peak %.3f GB per rank on %s\nauto_parallel: %s\n",
                     p.layout.str().c_str(), r.ranked.size(), static_cast<long long>(ranks), r.rejected.size(),
                     p.tokens_per_s, 100 * p.mfu, p.memory.peak / 1e9, r.hardware.name.c_str(), line.c_str());
        std::fflush(out);
      }
    } catch (const std::exception& e) {
      line = std::string("error: ") + e.what();
    }
  }
  line = parallel::text_from_rank0(world.get(), line);
  if (line.rfind("error: ", 0) == 0) MF_THROW("graph.auto_parallel: ", line.substr(7));
  Config chosen = c;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string::npos) end = line.size();
    const std::string kv = line.substr(at, end - at);
    const size_t eq = kv.find('=');
    MF_CHECK(eq != std::string::npos, "graph.auto_parallel: rank 0 sent '", kv, "', not key=value");
    chosen.set(kv.substr(0, eq), kv.substr(eq + 1), "graph.auto_parallel");
    at = end + 1;
  }
  chosen.set("graph.auto_parallel.enabled", "false", "graph.auto_parallel");
  return chosen;
}

}  // namespace mf::plan
