#include "meshflow/parallel/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "meshflow/core/error.h"

namespace mf::parallel {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved_1f1b") return PipelineSchedule::kInterleaved1F1B;
  MF_THROW("train.dist.pipeline_schedule '", name, "' is not one of gpipe, 1f1b, interleaved_1f1b");
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved_1f1b";
  }
  return "?";
}

namespace {
std::vector<PipelineAction> interleaved(int64_t p, int64_t s, int64_t m, int64_t v) {
  MF_CHECK(m % p == 0, "pipeline: the interleaved schedule needs the micro-batches (train.num_accumulation_steps = ", m,
           ") to be a multiple of train.dist.pipeline_parallel_size ", p);
  const int64_t total = m * v;
  const int64_t warmup = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  // Virtual micro-batch k: micro-batch (k / (p v)) p + k % p of chunk (k % (p v)) / p, the
  // chunks in reverse for backwards.
  auto at = [&](int64_t k, bool forward) {
    const int64_t group = (k % (p * v)) / p;
    return PipelineAction{forward, (k / (p * v)) * p + k % p, forward ? group : v - 1 - group};
  };
  std::vector<PipelineAction> a;
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) a.push_back(at(f, true));
  for (; f < total; ++f, ++b) {
    a.push_back(at(f, true));
    a.push_back(at(b, false));
  }
  for (; b < total; ++b) a.push_back(at(b, false));
  return a;
}
}  // namespace

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                             int64_t micro_batches, int64_t chunks) {
  MF_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1 && chunks >= 1, "pipeline_actions: stage ",
           stage, " of ", stages, " with ", micro_batches, " micro-batches and ", chunks, " chunks");
  MF_CHECK(chunks == 1 || schedule == PipelineSchedule::kInterleaved1F1B, "pipeline: train.dist.virtual_pipeline_size ",
           chunks, " > 1 needs train.dist.pipeline_schedule=interleaved_1f1b");
  if (schedule == PipelineSchedule::kInterleaved1F1B) return interleaved(stages, stage, micro_batches, chunks);
  std::vector<PipelineAction> a;
  const int64_t m = micro_batches;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int64_t i = 0; i < m; ++i) a.push_back({true, i, 0});
    for (int64_t i = 0; i < m; ++i) a.push_back({false, i, 0});
    return a;
  }
  const int64_t warmup = std::min(stages - stage - 1, m);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) a.push_back({true, f, 0});
  for (; f < m; ++f, ++b) {
    a.push_back({true, f, 0});
    a.push_back({false, b, 0});
  }
  for (; b < m; ++b) a.push_back({false, b, 0});
  return a;
}

namespace {
// A message between virtual stages: its micro-batch, the virtual stage receiving it, and its
// direction, as one key.
int64_t message_key(int64_t micro, int64_t to, bool forward, int64_t virtual_stages) {
  return (micro * virtual_stages + to) * 2 + (forward ? 1 : 0);
}
}  // namespace

std::vector<std::vector<int64_t>> sends_received(PipelineSchedule schedule, int64_t stages, int64_t stage,
                                                 int64_t micro_batches, int64_t chunks) {
  const std::vector<PipelineAction> mine = pipeline_actions(schedule, stages, stage, micro_batches, chunks);
  std::vector<std::vector<int64_t>> out(mine.size());
  if (stages == 1) return out;
  const int64_t p = stages, n = stages * chunks;
  // What action a of rank s receives and sends (-1: nothing).
  auto received = [&](int64_t s, const PipelineAction& a) {
    const int64_t j = a.chunk * p + s;
    return (a.forward ? j > 0 : j + 1 < n) ? message_key(a.micro, j, a.forward, n) : -1;
  };
  auto sent = [&](int64_t s, const PipelineAction& a) {
    const int64_t j = a.chunk * p + s;
    return (a.forward ? j + 1 < n : j > 0) ? message_key(a.micro, a.forward ? j + 1 : j - 1, a.forward, n) : -1;
  };
  // The neighbours' orders: where each receives and sends each message.
  struct Order {
    std::unordered_map<int64_t, int64_t> receives, sends;
  };
  std::map<int64_t, Order> ranks;
  for (int64_t r : {(stage + p - 1) % p, (stage + 1) % p}) {
    if (ranks.count(r)) continue;
    Order& o = ranks[r];
    const std::vector<PipelineAction> theirs = pipeline_actions(schedule, stages, r, micro_batches, chunks);
    for (int64_t i = 0; i < static_cast<int64_t>(theirs.size()); ++i) {
      if (const int64_t k = received(r, theirs[static_cast<size_t>(i)]); k >= 0) o.receives[k] = i;
      if (const int64_t k = sent(r, theirs[static_cast<size_t>(i)]); k >= 0) o.sends[k] = i;
    }
  }
  // This stage's unproven sends per receiving rank, by where that rank receives them.
  std::map<int64_t, std::multimap<int64_t, int64_t>> pending;
  for (int64_t i = 0; i < static_cast<int64_t>(mine.size()); ++i) {
    const PipelineAction& a = mine[static_cast<size_t>(i)];
    const int64_t j = a.chunk * p + stage;
    if (const int64_t k = received(stage, a); k >= 0) {
      const int64_t from = (a.forward ? j - 1 : j + 1) % p;
      const int64_t their_send = ranks.at(from).sends.at(k);
      auto& waiting = pending[from];
      for (auto it = waiting.begin(); it != waiting.end() && it->first <= their_send; it = waiting.erase(it))
        out[static_cast<size_t>(i)].push_back(it->second);
      std::sort(out[static_cast<size_t>(i)].begin(), out[static_cast<size_t>(i)].end());
    }
    if (const int64_t k = sent(stage, a); k >= 0) {
      const int64_t to = (a.forward ? j + 1 : j - 1) % p;
      pending[to].emplace(ranks.at(to).receives.at(k), i);
    }
  }
  return out;
}

int64_t max_in_flight(const std::vector<PipelineAction>& actions) {
  int64_t now = 0, most = 0;
  for (const auto& x : actions) {
    now += x.forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

std::string actions_str(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (const auto& x : actions) {
    if (!s.empty()) s += ' ';
    s += x.forward ? 'F' : 'B';
    s += std::to_string(x.micro);
    if (x.chunk > 0) {
      s += '.';
      s += std::to_string(x.chunk);
    }
  }
  return s;
}

std::vector<std::pair<int64_t, int64_t>> split_layers(int64_t layers, int64_t stages) {
  MF_CHECK(stages >= 1 && layers >= stages, "pipeline: model.num_layers ", layers, " is fewer than the pipeline's ",
           stages, " stages (pipeline_parallel_size x virtual_pipeline_size; each stage needs at least one layer)");
  std::vector<std::pair<int64_t, int64_t>> r;
  int64_t start = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t n = layers / stages + (s < layers % stages ? 1 : 0);
    r.emplace_back(start, start + n);
    start += n;
  }
  return r;
}

std::vector<std::pair<int64_t, int64_t>> balanced_split_layers(int64_t layers, int64_t stages, double first_extra,
                                                               double last_extra) {
  return balanced_split_layers(layers, stages, [&](int64_t k, int64_t a, int64_t b) {
    return static_cast<double>(b - a) + (k == 0 ? first_extra : 0.0) + (k == stages - 1 ? last_extra : 0.0);
  });
}

std::vector<std::pair<int64_t, int64_t>> balanced_split_layers(int64_t layers, int64_t stages, const StageCost& cost) {
  split_layers(layers, stages);  // the same checks
  const double inf = 1e300;
  // best[k][i]: the smallest achievable maximum cost of stages 0..k covering layers [0, i).
  std::vector<std::vector<double>> best(static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(layers + 1), inf));
  std::vector<std::vector<int64_t>> cut(best.size(), std::vector<int64_t>(static_cast<size_t>(layers + 1), 0));
  for (int64_t i = 1; i <= layers; ++i) best[0][static_cast<size_t>(i)] = cost(0, 0, i);
  for (int64_t k = 1; k < stages; ++k)
    for (int64_t i = k + 1; i <= layers; ++i)
      for (int64_t j = i - 1; j >= k; --j) {  // stage k takes [j, i); later j = more on earlier stages
        const double c = std::max(best[static_cast<size_t>(k - 1)][static_cast<size_t>(j)], cost(k, j, i));
        if (c < best[static_cast<size_t>(k)][static_cast<size_t>(i)] - 1e-12) {
          best[static_cast<size_t>(k)][static_cast<size_t>(i)] = c;
          cut[static_cast<size_t>(k)][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<std::pair<int64_t, int64_t>> r(static_cast<size_t>(stages));
  int64_t end = layers;
  for (int64_t k = stages - 1; k >= 0; --k) {
    const int64_t start = k == 0 ? 0 : cut[static_cast<size_t>(k)][static_cast<size_t>(end)];
    r[static_cast<size_t>(k)] = {start, end};
    end = start;
  }
  return r;
}

std::vector<std::pair<int64_t, int64_t>> custom_split_layers(const std::vector<int64_t>& stage_of_layer, int64_t layers,
                                                             int64_t stages) {
  MF_CHECK(static_cast<int64_t>(stage_of_layer.size()) == layers, "train.dist.custom_pipeline_stage_id has ",
           stage_of_layer.size(), " entries; it needs one stage per layer (model.num_layers = ", layers, ")");
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t s = stage_of_layer[static_cast<size_t>(l)];
    const int64_t want = r.empty() ? 0 : static_cast<int64_t>(r.size()) - 1;
    if (!r.empty() && s == want) {
      r.back().second = l + 1;
      continue;
    }
    MF_CHECK(s == static_cast<int64_t>(r.size()), "train.dist.custom_pipeline_stage_id: layer ", l, " is on stage ", s,
             "; stages must start at 0 and rise by one (each a contiguous run of layers)");
    r.emplace_back(l, l + 1);
  }
  MF_CHECK(static_cast<int64_t>(r.size()) == stages, "train.dist.custom_pipeline_stage_id names ", r.size(),
           " stages; the pipeline has ", stages);
  return r;
}

}  // namespace mf::parallel
