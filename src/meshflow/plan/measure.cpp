#include "meshflow/plan/measure.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <vector>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/runtime/run_summary.h"

namespace mf::plan {

std::vector<int64_t> plans_to_measure(int64_t total, int64_t count) {
  std::vector<int64_t> out;
  if (total <= 0) return out;
  if (count <= 0 || count >= total) {
    out.resize(static_cast<size_t>(total));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = count == 1 ? 0 : static_cast<int64_t>(std::llround(static_cast<double>(i) * static_cast<double>(total - 1) / static_cast<double>(count - 1)));
    if (out.empty() || out.back() != at) out.push_back(at);
  }
  return out;
}

std::vector<std::string> measured_plan_keys(const std::string& text, const std::string& source) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    MF_CHECK(!j.is_discarded() && j.is_object() && j.contains("keys") && j["keys"].is_object(), "plan --skip: ", source,
             " line ", n, " is not a measured plan (a JSON object with \"keys\", as plan --measure --json prints)");
    out.push_back(j["keys"].dump());  // nlohmann::json keeps an object's keys sorted: one string per layout
  }
  return out;
}

std::string plan_key(const Plan& p, int64_t num_layers) {
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [k, v] : p.layout.config_keys(num_layers)) keys[k] = v;
  return keys.dump();
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  MF_CHECK(a.size() == b.size(), "kendall_tau: ", a.size(), " values against ", b.size());
  const size_t n = a.size();
  if (n < 2) return 0;
  double net = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double s = (a[i] - a[j]) * (b[i] - b[j]);
      net += s > 0 ? 1 : s < 0 ? -1 : 0;
    }
  return net / (static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

std::vector<Measured> measure_plans(const Config& c, const PlanResult& r, const MeasureOptions& o,
                                    const comm::CommPtr& world, std::FILE* out) {
  const int64_t world_size = world ? world->size() : 1;
  MF_CHECK(world_size == r.ranks, "plan --measure: the plans are for ", r.ranks, " ranks and this job has ", world_size,
           " (run it as mpirun -np ", r.ranks, " meshflow plan ... --measure)");
  MF_CHECK(o.steps >= 1, "plan --measure: --steps must be positive (", o.steps, ")");
  MF_CHECK(o.train != nullptr, "plan --measure: no training run to measure the plans with");
  const bool leader = !world || world->rank() == 0;
  // Every plan trains into a folder of its own in a temporary folder rank 0 makes (the ranks share
  // the file system, as a run's output_dir).
  std::string made;
  if (leader) {
    std::string pattern = (std::filesystem::temp_directory_path() / "meshflow-plan-measure-XXXXXX").string();
    made = ::mkdtemp(pattern.data()) ? pattern : std::string();
  }
  const std::filesystem::path base = parallel::text_from_rank0(world.get(), made);
  MF_CHECK(!base.empty(), "plan --measure: rank 0 could not make a folder in ", std::filesystem::temp_directory_path().string());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> quiet(std::fopen("/dev/null", "w"), &std::fclose);
  MF_CHECK(quiet != nullptr, "plan --measure: cannot open /dev/null");
  // The plans to measure: those not measured before (--skip), `o.plans` of them spread over the ranking.
  std::vector<int64_t> left;
  int64_t skipped = 0;
  {
    std::string text;
    if (!o.skip.empty()) text = parallel::text_from_rank0(world.get(), leader ? read_file(o.skip) : std::string());
    const std::vector<std::string> done = measured_plan_keys(text, o.skip);
    const std::set<std::string> before(done.begin(), done.end());
    for (size_t i = 0; i < r.ranked.size(); ++i) {
      if (before.count(plan_key(r.ranked[i], r.model.layers))) ++skipped;
      else left.push_back(static_cast<int64_t>(i));
    }
  }
  std::vector<int64_t> chosen;
  for (int64_t at : plans_to_measure(static_cast<int64_t>(left.size()), o.plans)) chosen.push_back(left[static_cast<size_t>(at)]);
  if (leader && !o.json)
    std::fprintf(out, "measuring %zu of %zu plans on this machine (%lld measured before left out), %lld steps each (the median after the first two)\n",
                 chosen.size(), r.ranked.size(), static_cast<long long>(skipped), static_cast<long long>(o.steps));
  std::vector<Measured> results;
  // The job's first training pays for what the later ones find done (the ranks' connections,
  // the allocator's blocks, the pages first touched) beyond its warm-up steps: a run of the first
  // plan nobody times goes before, so that the chosen plan is measured as the others are.
  const auto train_plan = [&](int64_t i, int64_t steps, const std::string& folder) {
    const Plan& p = r.ranked[static_cast<size_t>(i)];
    Config run = apply_plan(c, r.model, p.layout);
    const std::filesystem::path dir = base / folder;
    run.set("train.output_dir", dir.string(), "plan --measure");
    run.set("train.train_iter", std::to_string(steps), "plan --measure");
    run.set("train.exit_iter", "0", "plan --measure");
    run.set("train.log_period", "1", "plan --measure");  // every step's figures gathered from every rank
    run.set("train.resume", "false", "plan --measure");
    run.set("train.evaluation.enabled", "false", "plan --measure");
    const runtime::RunSummary s = o.train(run, quiet.get(), world);
    parallel::barrier(world.get());  // every rank's checkpoint pieces written before the folder goes
    if (leader) std::filesystem::remove_all(dir);
    return s;
  };
  if (!chosen.empty()) train_plan(chosen.front(), 2, "warm_up");
  for (int64_t i : chosen) {
    const Plan& p = r.ranked[static_cast<size_t>(i)];
    const runtime::RunSummary s = train_plan(i, o.steps, detail::cat("plan_", i + 1));
    MF_CHECK(!s.step_seconds.empty(), "plan --measure: no step time of ", p.layout.str());
    // The median of the steps after the first two (robust to a step the scheduler or the page
    // faults of a fresh block slowed down).
    std::vector<double> t(s.step_seconds.begin() + (s.step_seconds.size() > 2 ? 2 : 0), s.step_seconds.end());
    std::sort(t.begin(), t.end());
    Measured m;
    m.rank = i + 1;
    m.predicted_s = p.time.total();
    m.measured_s = t.size() % 2 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
    m.predicted_peak = p.memory.peak;
    m.measured_peak = static_cast<double>(s.peak_bytes);
    results.push_back(m);
    if (!leader) continue;
    const double error = 100 * (m.predicted_peak - m.measured_peak) / m.measured_peak;
    if (o.json) {
      nlohmann::ordered_json keys = nlohmann::ordered_json::object();
      for (const auto& [k, v] : p.layout.config_keys(r.model.layers)) keys[k] = v;
      nlohmann::ordered_json j{{"rank", m.rank},       {"layout", p.layout.str()},        {"keys", keys},
                               {"predicted_s", m.predicted_s}, {"measured_s", m.measured_s},
                               {"predicted_peak", m.predicted_peak}, {"measured_peak", m.measured_peak}};
      std::fprintf(out, "%s\n", j.dump().c_str());
    } else {
      std::fprintf(out, "plan %5lld | %-52s | predicted %8.4f s | measured %8.4f s | peak predicted %.4f GB, measured %.4f GB (%+.1f%%)\n",
                   static_cast<long long>(m.rank), p.layout.str().c_str(), m.predicted_s, m.measured_s,
                   m.predicted_peak / 1e9, m.measured_peak / 1e9, error);
    }
    std::fflush(out);
  }
  if (leader) std::filesystem::remove_all(base);
  if (!leader || o.json || results.empty()) return results;
  // The summary: the chosen (first predicted) plan against the measured order, and memory.
  std::vector<double> predicted, measured;
  int64_t within = 0;
  double worst = 0;
  for (const Measured& m : results) {
    predicted.push_back(m.predicted_s);
    measured.push_back(m.measured_s);
    const double e = std::abs(m.predicted_peak - m.measured_peak) / m.measured_peak;
    within += e <= 0.10;
    worst = std::max(worst, e);
  }
  const size_t best = static_cast<size_t>(std::min_element(measured.begin(), measured.end()) - measured.begin());
  const std::string best_plan = detail::cat("plan ", results[best].rank, ", ",
                                            r.ranked[static_cast<size_t>(results[best].rank - 1)].layout.str());
  const double tau = kendall_tau(predicted, measured);
  if (results.front().rank == 1) {
    const double first = measured.front();
    const auto faster = std::count_if(measured.begin(), measured.end(), [&](double x) { return x < first; });
    std::fprintf(out, "measured %zu plans: the chosen plan (%s) took %.4f s, rank %lld of %zu measured; regret %.1f%% against "
                 "the best measured (%s, %.4f s); Kendall's tau %.3f between the predicted and measured orders\n",
                 results.size(), r.ranked.front().layout.str().c_str(), first, static_cast<long long>(faster + 1),
                 results.size(), 100 * (first / measured[best] - 1), best_plan.c_str(), measured[best], tau);
  } else {  // the chosen plan was measured before (--skip)
    std::fprintf(out, "measured %zu plans, the chosen plan not among them: the best measured is %s, %.4f s; Kendall's tau "
                 "%.3f between the predicted and measured orders\n", results.size(), best_plan.c_str(), measured[best], tau);
  }
  std::fprintf(out, "memory: %lld of %zu plans within 10%% of the measured peak, largest error %.1f%%\n",
               static_cast<long long>(within), results.size(), 100 * worst);
  return results;
}

}  // namespace mf::plan
