#include "meshflow/plan/layout.h"

#include <algorithm>
#include <functional>

#include "meshflow/core/error.h"
#include "meshflow/parallel/pipeline_schedule.h"

namespace mf::plan {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::vector<std::pair<std::string, std::string>> Layout::config_keys(int64_t num_layers) const {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  auto i = [](int64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> keys;
  for (size_t d = 0; d < dims.count(); ++d) keys.emplace_back(global::dim_specs()[d].config_key, i(dims.size(d)));
  const std::vector<std::pair<std::string, std::string>> rest = {
          {"train.dist.sequence_parallel", b(sequence_parallel)},
          {"train.dist.context_parallel_mode", context_all_to_all ? "all_to_all" : "ring"},
          {"train.dist.pipeline_schedule", schedule},
          {"train.dist.virtual_pipeline_size", i(virtual_stages)},
          {"train.zero_optimization.enabled", b(zero_stage > 0)},
          {"train.zero_optimization.stage", i(std::max<int64_t>(zero_stage, 1))},
          {"train.train_micro_batch_size", i(micro_batch)},
          {"train.num_accumulation_steps", i(accumulation)},
          {"train.global_batch_size", i(global_batch())},
          {"train.activation_checkpoint.enabled", b(recompute != Recompute::kNone)},
          {"train.activation_checkpoint.granularity", recompute == Recompute::kSelective ? "selective" : "full"},
          {"train.activation_checkpoint.start_layer", "0"},
          {"train.activation_checkpoint.end_layer",
           i(recompute == Recompute::kFull && recompute_layers < num_layers ? recompute_layers : -1)}};
  keys.insert(keys.end(), rest.begin(), rest.end());
  return keys;
}

std::string Layout::str() const {
  // The batch-splitting dimensions first, then the others innermost first: "dp2 tp2+sp pp2".
  std::string s;
  for (const bool batch : {true, false})
    for (size_t d = dims.count(); d-- > 0;) {
      if (global::dim_specs()[d].splits_batch != batch) continue;
      if (std::string(dims.name(d)) == "cp" && dims.size(d) == 1) continue;  // named only when the sequence is split
      s += detail::cat(s.empty() ? "" : " ", dims.name(d), dims.size(d), std::string(dims.name(d)) == "tp" && sequence_parallel ? "+sp" : "");
    }
  if (cp() > 1 && context_all_to_all) s += " all_to_all";
  if (pp() > 1) s += detail::cat(" ", schedule, virtual_stages > 1 ? detail::cat("x", virtual_stages) : std::string());
  s += detail::cat(" mb", micro_batch, "x", accumulation);
  if (zero_stage > 0) s += detail::cat(" zero", zero_stage);
  if (recompute == Recompute::kSelective) s += " recompute=selective";
  if (recompute == Recompute::kFull) s += detail::cat(" recompute=full:", recompute_layers);
  return s;
}

const std::vector<std::string>& layout_keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> keys;
    for (const global::DimSpec& d : global::dim_specs()) keys.push_back(d.config_key);
    for (const char* key : {
      "train.dist.sequence_parallel",       "train.dist.pipeline_schedule",        "train.dist.virtual_pipeline_size",
      "train.zero_optimization.enabled",    "train.zero_optimization.stage",       "train.activation_checkpoint.enabled",
      "train.activation_checkpoint.granularity", "train.activation_checkpoint.end_layer"})
      keys.push_back(key);
    return keys;
  }();
  return k;
}

int64_t planned_global_batch(const Config& c, int64_t ranks) {
  const int64_t global = c.get_int("train.global_batch_size");
  if (global > 0) return global;
  return c.get_int("train.train_micro_batch_size") * std::max<int64_t>(1, c.get_int("train.num_accumulation_steps")) *
         ranks;
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// The user's constraints: layout keys that differ from their defaults.
struct Fixed {
  const Config& c;
  Config defaults = Config::defaults();
  bool set(const std::string& key) const { return c.get_text(key) != defaults.get_text(key); }
};

// Why `l` cannot run the model, or "" — the checks the model and the trainer make before any work.
std::string infeasible(const Layout& l, const ModelCosts& m) {
  auto cat = [](auto&&... a) { return detail::cat(a...); };
  if (const int64_t cp = l.dims.size("cp"); cp > 1) {
    if (m.seq % cp != 0) return cat("cp ", cp, " does not divide the sequence ", m.seq);
    if (l.context_all_to_all && l.tp() > 1)
      return cat("cp ", cp, " all_to_all with tp ", l.tp(), ": the heads would be split over both");
    if (l.context_all_to_all && m.heads % cp != 0)
      return cat("cp ", cp, " all_to_all does not divide model.num_attention_heads ", m.heads);
    if (m.score_bytes > 0)
      return cat("cp ", cp, ": the model's attention is unfused (a bias on the scores), which the sequence split does not run");
  }
  if (m.heads % l.tp() != 0) return cat("tp ", l.tp(), " does not divide model.num_attention_heads ", m.heads);
  if (m.kv_heads % l.tp() != 0) return cat("tp ", l.tp(), " does not divide model.num_key_value_heads ", m.kv_heads);
  if (m.ffn % l.tp() != 0) return cat("tp ", l.tp(), " does not divide the MLP width ", m.ffn);
  if (l.sequence_parallel && m.seq % l.tp() != 0) return cat("sequence parallel: tp ", l.tp(), " does not divide the sequence ", m.seq);
  if (l.pp() * l.virtual_stages > m.layers)
    return cat(l.pp() * l.virtual_stages, " pipeline stages for ", m.layers, " layers");
  if (l.schedule == "interleaved_1f1b" && l.accumulation % l.pp() != 0)
    return cat("interleaved_1f1b: ", l.accumulation, " micro-batches is not a multiple of pp ", l.pp());
  return "";
}

}  // namespace

Candidates enumerate_layouts(const Config& c, const ModelCosts& m, int64_t ranks) {
  MF_CHECK(ranks >= 1, "plan: the number of processes must be at least 1, got ", ranks);
  const int64_t global = planned_global_batch(c, ranks);
  const Fixed fixed{c};
  auto want = [&](const std::string& key, const std::string& value) {  // a candidate value allowed by the constraints
    return !fixed.set(key) || c.get_text(key) == value;
  };
  Candidates out;
  const bool zero_on = c.get_bool("train.zero_optimization.enabled");
  const bool recompute_on = c.get_bool("train.activation_checkpoint.enabled");
  // Every split of the ranks over the dimensions the user did not fix: the elastic one (dp) takes
  // the ranks the others leave; the others are tried innermost first (tp, then pp), smallest first.
  const size_t elastic = global::elastic_dim();
  std::vector<size_t> order;
  for (size_t d = global::dim_specs().size(); d-- > 0;)
    if (d != elastic) order.push_back(d);
  std::vector<global::ParallelDims> splits;
  std::function<void(size_t, global::ParallelDims, int64_t)> split = [&](size_t k, global::ParallelDims dims, int64_t left) {
    if (k == order.size()) {
      dims.set(dims.name(elastic), left);
      splits.push_back(dims);
      return;
    }
    for (int64_t n : divisors(left)) {
      dims.set(dims.name(order[k]), n);
      split(k + 1, dims, left / n);
    }
  };
  split(0, global::ParallelDims(), ranks);
  for (const global::ParallelDims& dims : splits) {
    bool kept = true;  // a size the user set (not 0: derived) is a constraint
    for (size_t d = 0; d < dims.count(); ++d) {
      const char* key = global::dim_specs()[d].config_key;
      kept = kept && !(fixed.set(key) && c.get_int(key) != 0 && c.get_int(key) != dims.size(d));
    }
    if (!kept) continue;
    {
      const int64_t dp = dims.batch_ranks(), tp = dims.size("tp"), pp = dims.size("pp");
      Layout base;
      base.dims = dims;
      base.context_all_to_all = c.get_string("train.dist.context_parallel_mode") == "all_to_all";
      if (global % dp != 0) {
        base.micro_batch = 1;
        base.accumulation = 1;
        out.rejected.push_back({base, detail::cat("global batch ", global, " is not a multiple of dp ", dp)});
        continue;
      }
      // Pipeline schedules: 1f1b without pipelining; with it 1f1b, gpipe and interleaved over
      // every chunk count that divides the layers per stage.
      std::vector<std::pair<std::string, int64_t>> schedules;
      if (pp == 1) {
        schedules.push_back({c.get_string("train.dist.pipeline_schedule") == "gpipe" ? "gpipe" : "1f1b", 1});
      } else {
        // (gpipe runs what 1f1b runs when a step has one micro-batch per stage: see below.)
        for (const char* s : {"1f1b", "gpipe"})
          if (want("train.dist.pipeline_schedule", s)) schedules.push_back({s, 1});
        if (want("train.dist.pipeline_schedule", "interleaved_1f1b"))
          for (int64_t v = 2; v <= 8 && v * pp <= m.layers; ++v)
            if (want("train.dist.virtual_pipeline_size", std::to_string(v))) schedules.push_back({"interleaved_1f1b", v});
      }
      for (const auto& [schedule, v] : schedules)
        for (bool sp : {false, true}) {
          if (sp && tp == 1) continue;
          if (!want("train.dist.sequence_parallel", sp ? "true" : "false")) continue;
          for (int64_t zero = 0; zero <= 3; ++zero) {
            if (zero > 0 && dp == 1) continue;
            if (zero_on && zero == 0) continue;  // ZeRO asked for: its stage is the user's
            if (zero_on && zero != c.get_int("train.zero_optimization.stage")) continue;
            if (!zero_on && fixed.set("train.zero_optimization.enabled") && zero > 0) continue;
            for (int64_t mb : divisors(global / dp)) {
              if (mb > 64) break;  // micro-batches of up to 64 rows
              // Recomputation: none, selective, full over every layer, full over half of them.
              std::vector<std::pair<Recompute, int64_t>> recomputes = {{Recompute::kNone, 0},
                                                                        {Recompute::kSelective, m.layers},
                                                                        {Recompute::kFull, m.layers}};
              if (m.layers >= 2) recomputes.push_back({Recompute::kFull, m.layers / 2});
              for (const auto& [rc, layers] : recomputes) {
                if (recompute_on && rc == Recompute::kNone) continue;
                if (fixed.set("train.activation_checkpoint.enabled") && !recompute_on && rc != Recompute::kNone) continue;
                if (fixed.set("train.activation_checkpoint.granularity") &&
                    c.get_string("train.activation_checkpoint.granularity") != (rc == Recompute::kSelective ? "selective" : "full") &&
                    rc != Recompute::kNone)
                  continue;
                // One micro-batch: gpipe's order is 1f1b's, the same run.
                if (schedule == "gpipe" && global / dp / mb == 1 && want("train.dist.pipeline_schedule", "1f1b")) continue;
                Layout l = base;
                l.schedule = schedule;
                l.virtual_stages = v;
                l.sequence_parallel = sp;
                l.zero_stage = zero;
                l.micro_batch = mb;
                l.accumulation = global / dp / mb;
                l.recompute = rc;
                l.recompute_layers = rc == Recompute::kNone ? 0 : layers;
                const std::string why = infeasible(l, m);
                if (why.empty()) out.feasible.push_back(l);
                else out.rejected.push_back({l, why});
              }
            }
          }
        }
    }
  }
  return out;
}

}  // namespace mf::plan
