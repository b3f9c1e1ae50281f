#include "meshflow/plan/memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "meshflow/parallel/pipeline_schedule.h"
#include "meshflow/runtime/build.h"

namespace mf::plan {

Config with_layout(const Config& c, const ModelCosts& m, const Layout& l) {
  Config out = c;
  for (const auto& [key, value] : l.config_keys(m.layers)) out.set(key, value, "plan");
  return out;
}

namespace {

// Elements layer `layer` keeps per token under the layout (ModelCosts::layer_acts).
double layer_kept(const ModelCosts& m, const Layout& l, int64_t layer, bool recomputed) {
  const double tp = static_cast<double>(l.tp()), seq_div = l.sequence_parallel ? tp : 1.0;
  const LayerActivations& a = m.layer_acts.at(static_cast<size_t>(layer));
  if (recomputed && l.recompute == Recompute::kFull)  // its input
    return a.whole_input > 0 ? a.whole_input : static_cast<double>(m.hidden) / seq_div;
  double kept = a.sequence / seq_div + a.gathered + a.split / tp;
  if (recomputed && l.recompute == Recompute::kSelective) kept -= a.core / tp;
  return kept;
}

// Bytes per token an unfused attention keeps of its scores (heads / tp x seq per token): none when
// the layer is recomputed, fully or selectively.
double scores_kept(const ModelCosts& m, const Layout& l, bool recomputed) {
  if (recomputed && l.recompute != Recompute::kNone) return 0;
  return static_cast<double>(m.heads) / static_cast<double>(l.tp()) * static_cast<double>(m.seq) * m.score_kept_bytes;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> stage_layers(const Config& c, const ModelCosts& m, const Layout& l) {
  if (l.pp() == 1 && l.virtual_stages == 1) return {{0, m.layers}};
  return runtime::pipeline_layers(with_layout(c, m, l), l.pp() * l.virtual_stages);
}

MemoryEstimate estimate_memory(const Config& c, const ModelCosts& m, const Layout& l) {
  return estimate_memory(m, l, stage_layers(c, m, l));
}

namespace {

// A backward of a stage's schedule: the micro-batches each chunk holds just before it (its own
// included), and its chunk. The distinct ones of a (schedule, stages, stage, micro-batches,
// chunks), computed once: a plan for thousands of ranks has thousands of micro-batches.
struct BackwardState {
  std::vector<int64_t> held;
  int64_t chunk = 0;
  bool first = false;  // the stage's first backward of the step: no gradient made yet
  // Messages this stage sent whose receipt is not proven yet (the runtime keeps them): before the
  // backward's receive, and after it (what its work runs beside). Each is a (tokens, C) tensor:
  // a gradient sent back, or a chunk's output sent on (held for backward, as its graph only
  // once received).
  int64_t sent_before = 0, sent = 0;
  bool operator<(const BackwardState& o) const {
    return std::tie(chunk, first, sent_before, sent, held) < std::tie(o.chunk, o.first, o.sent_before, o.sent, o.held);
  }
};

const std::vector<BackwardState>& backward_states(parallel::PipelineSchedule schedule, int64_t stages, int64_t stage,
                                                  int64_t micro, int64_t chunks) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t>, std::vector<BackwardState>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(static_cast<int>(schedule), stages, stage, micro, chunks);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::set<BackwardState> seen;
  std::vector<int64_t> held(static_cast<size_t>(chunks), 0);
  bool first = true;
  // What a stage sends stays until its receipt is proven (train/pipeline_executor.cpp).
  const auto actions = parallel::pipeline_actions(schedule, stages, stage, micro, chunks);
  const auto received = parallel::sends_received(schedule, stages, stage, micro, chunks);
  const int64_t last = stages * chunks - 1;
  int64_t sent = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    const parallel::PipelineAction& a = actions[i];
    const int64_t j = a.chunk * stages + stage, before = sent;
    sent -= static_cast<int64_t>(received[i].size());
    if (a.forward) {
      ++held[static_cast<size_t>(a.chunk)];
      if (j < last) ++sent;
      continue;
    }
    seen.insert({held, a.chunk, first, before, sent});
    first = false;
    --held[static_cast<size_t>(a.chunk)];
    if (j > 0) ++sent;
  }
  return cache.emplace(key, std::vector<BackwardState>(seen.begin(), seen.end())).first->second;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelCosts& m, const Layout& l, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const auto schedule = l.pp() > 1 ? parallel::parse_pipeline_schedule(l.schedule) : parallel::PipelineSchedule::k1F1B;
  // This rank's tokens of a micro-batch: its slice of each sequence under context parallelism
  // (its layers and its loss head see only those).
  const double tokens = static_cast<double>(l.micro_batch * m.seq) / static_cast<double>(l.cp());
  const double act_bytes = static_cast<double>(m.act_bytes);
  const double pbytes = static_cast<double>(m.param_bytes), dp = static_cast<double>(l.dp());
  const double tp = static_cast<double>(l.tp()), seq_div = l.sequence_parallel ? tp : 1.0;
  const double C = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  const bool full = l.recompute == Recompute::kFull;
  // The loss head's logits per chunk of rows (layers/lm_loss.h): rows x V/tp, at most
  // head_chunk_elements (1 << 24) per chunk, chunks of equal size.
  const double chunk_elements = 16777216.0;
  const double vocab_local = std::ceil(V / tp);
  const double most = std::max(1.0, std::floor(chunk_elements / std::max(1.0, vocab_local)));
  const double head_tokens = std::ceil(tokens * m.head_token_share);  // the rows the head projects
  const double chunks = std::ceil(head_tokens / most), chunk_rows = std::ceil(head_tokens / chunks);
  const double chunk_bytes = chunk_rows * vocab_local * act_bytes;
  // Gradients held through a step: the data-parallel buckets (ZeRO-2/3: this rank's segment), and
  // with accumulation the parameters' own .grad summing the micro-batches (the buckets take the
  // gradients of the last one). One process without accumulation frees them every step and
  // makes them anew in backward.
  const bool accumulates = l.accumulation > 1;
  MemoryEstimate best;
  best.peak = -1;
  for (int64_t s = 0; s < l.pp(); ++s) {
    const bool first = s == 0, last = s == l.pp() - 1;
    // ---- model state, and what each chunk's layers keep per micro-batch (bytes, in layer order)
    double elems = 0, largest_layer = 0, remade = 0;  // remade: the most a layer's full recomputation makes
    double most_work = 0;                              // the most a layer's LayerBytes::work
    struct LayerBytes {
      double kept = 0;        // what backward keeps per micro-batch
      bool recomputed = false;
      double grads = 0;       // its parameters' gradients
      double remade = 0;      // its activations made again (full recomputation)
      double work = 0;        // its own backward's: an eager attention's score gradients, and
                              // under selective recomputation the core made again
    };
    std::vector<std::vector<LayerBytes>> chunk_layers(static_cast<size_t>(l.virtual_stages));
    for (int64_t k = 0; k < l.virtual_stages; ++k) {
      const auto [a, b] = ranges[static_cast<size_t>(k * l.pp() + s)];
      for (int64_t layer = a; layer < b; ++layer) {
        const double p = static_cast<double>(m.layer_params[static_cast<size_t>(layer)].on_rank(l.tp()));
        elems += p;
        largest_layer = std::max(largest_layer, p);
        const bool recomputed = l.recompute != Recompute::kNone && layer < l.recompute_layers;
        const LayerActivations& acts = m.layer_acts.at(static_cast<size_t>(layer));
        // An attention bias: its ids kept (and the bias itself, a selective checkpoint's input),
        // its gradient made in backward; under full recomputation both made again there.
        const bool selective = recomputed && l.recompute == Recompute::kSelective, whole = recomputed && full;
        const double bias_kept = whole ? 0.0 : acts.bias_ids_bytes + (selective ? acts.bias_bytes : 0.0);
        const double kept = tokens * (layer_kept(m, l, layer, recomputed) * act_bytes + scores_kept(m, l, recomputed)) + bias_kept;
        const double again =
            tokens * (layer_kept(m, l, layer, false) * act_bytes + scores_kept(m, l, false)) + acts.bias_ids_bytes + acts.bias_bytes;
        remade = std::max(remade, again);
        double work = tokens * acts.score_work / tp * act_bytes + acts.bias_bytes;
        if (selective) work += tokens * acts.core / tp * act_bytes;
        most_work = std::max(most_work, work);
        chunk_layers[static_cast<size_t>(k)].push_back({kept, recomputed, p * pbytes, again, work});
      }
    }
    double head_unit = 0;  // the parameters the head uses (ZeRO-3 gathers them as a unit)
    if (first) elems += static_cast<double>(m.embedding.on_rank(l.tp()));
    if (last) {
      head_unit = static_cast<double>(m.head.on_rank(l.tp()) + (m.tied ? m.tied_copy.on_rank(l.tp()) : 0));
      elems += static_cast<double>(m.head.on_rank(l.tp()));
      if (!first && m.tied) elems += static_cast<double>(m.tied_copy.on_rank(l.tp()));
    }
    MemoryEstimate e;
    e.stage = s;
    e.parameters = elems * pbytes / (l.zero_stage >= 3 ? dp : 1.0);
    e.gradients = elems * pbytes / (l.zero_stage >= 2 ? dp : 1.0);
    e.optimizer_state = elems * (8.0 + (m.amp ? 4.0 : 0.0)) / (l.zero_stage >= 1 ? dp : 1.0);  // AdamW's m, v (+ f32 master)
    // Held through the step: parameters, optimizer state, gradients where they persist (ZeRO-2/3:
    // this rank's segment, and the whole gradients too while micro-batches accumulate).
    double held_state = e.parameters + e.optimizer_state;
    if (l.dp() > 1) held_state += e.gradients;
    if (accumulates) held_state += elems * pbytes;
    // ---- activations: what each chunk's micro-batches keep, over the schedule
    // The head keeps the last layer's output and the final norm's, and without full
    // recomputation every chunk's logits (the cross-entropy's input).
    const double head_kept = last ? (tokens * (C / seq_div + C) + (full ? 0.0 : head_tokens * vocab_local)) * act_bytes : 0.0;
    // A layer's backward: its input's and the MLP hidden state's gradients, and for a recomputed
    // layer (full) its activations made again (LayerBytes::remade).
    // (An unfused attention: and two scores' gradients, the softmax's beside its input's.)
    const double score_grads = m.score_bytes > 0 ? 2 * static_cast<double>(m.heads) / tp * static_cast<double>(m.seq) * act_bytes : 0.0;
    const double grad_work = tokens * ((static_cast<double>(m.ffn) / tp + 2 * C) * act_bytes + score_grads);
    // The head's backward, chunk by chunk: the logits' gradient beside the logits (kept, or made
    // again under full recomputation), then the table's gradient (V/tp x C) beside the logits'
    // gradient once the logits are freed. Under full recomputation without accumulation the
    // table's gradient of the first chunks stays while the later chunks run.
    const double table_bytes = vocab_local * C * pbytes;
    const double sent_bytes = tokens * C / seq_div * act_bytes;  // a message between stages
    double head_work = std::max(chunk_bytes, table_bytes);
    if (full) head_work = chunks >= 2 && !accumulates ? 2 * chunk_bytes + table_bytes : std::max(2 * chunk_bytes, chunk_bytes + table_bytes);
    const bool zero_packs = l.dp() > 1 && l.zero_stage >= 2;
    const double embedding_unit = first ? static_cast<double>(m.embedding.on_rank(l.tp())) : 0.0;
    const double zero3_units = l.zero_stage >= 3 ? (std::max(head_unit, largest_layer) + largest_layer) * pbytes : 0.0;
    auto kept_by = [&](int64_t k, bool head) {
      double b = head ? head_kept : 0.0;
      for (const LayerBytes& layer : chunk_layers[static_cast<size_t>(k)]) b += layer.kept;
      return b;
    };
    double held = 0, dynamic = 0, kept_at = 0, work_at = 0;
    // With accumulation the parameters' .grad are held through the step (held_state) — except in
    // the stage's first backward, which makes them as it goes: `unmade` of them do not exist yet.
    double unmade = 0;
    auto candidate = [&](double work) {
      work += zero3_units - unmade;
      if (held + work > dynamic) {
        dynamic = held + work;
        kept_at = held;
        work_at = work;
      }
    };
    for (const BackwardState& st : backward_states(schedule, l.pp(), s, l.accumulation, l.virtual_stages)) {
      double activations = 0;
      for (int64_t k = 0; k < l.virtual_stages; ++k)
        activations += static_cast<double>(st.held[static_cast<size_t>(k)]) * kept_by(k, last && k == l.virtual_stages - 1);
      // Before the backward's receive: what the forwards left, beside the gradient arriving.
      unmade = accumulates && st.first ? elems * pbytes : 0.0;
      held = activations + static_cast<double>(st.sent_before) * sent_bytes;
      if (!(last && st.chunk == l.virtual_stages - 1)) candidate(sent_bytes);
      held = activations + static_cast<double>(st.sent) * sent_bytes;
      // ZeRO-2/3, the chunk's last backward of the step: as a unit's gradients are final they
      // are packed for their reduce-scatter (parallel/zero_shards.h), the pack (the unit's whole
      // gradients) beside the gradients until each is copied in.
      // (With accumulation the gradients are the .grad held through the step: the pack alone is new.)
      const double packs = zero_packs && st.held[static_cast<size_t>(st.chunk)] == 1 ? (accumulates ? 1.0 : 2.0) : 0.0;
      auto made = [&](double bytes) { unmade = std::max(0.0, unmade - bytes); };
      // Backward runs the head, then the chunk's layers last to first, each freeing what it kept.
      if (last && st.chunk == l.virtual_stages - 1) {
        // Once the table's .grad exists (an accumulating step's later micro-batches), the head's
        // GEMM adds its gradient there (beta = 1): no table-sized gradient beside the logits'.
        // Recomputed chunks hand theirs back through the checkpoint: made, as before.
        candidate(accumulates && !st.first && !full ? chunk_bytes : head_work);
        held -= head_kept;
        made(head_unit * pbytes);
        candidate(packs * head_unit * pbytes);
        // A table the head shares with the embedding on this stage: the head's part of its
        // gradient waits for the embedding's, through the layers' backward. (With accumulation it
        // is added into the table's .grad, counted with the held state or made here.)
        if (first && m.tied && !accumulates) held += table_bytes;
      }
      const auto& layers = chunk_layers[static_cast<size_t>(st.chunk)];
      for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
        candidate(grad_work + it->work + (it->recomputed && full ? it->remade : 0.0) + packs * it->grads);
        held -= it->kept;
        made(it->grads);
      }
      // The embedding's backward: its rows are added into the table's .grad where that exists by
      // then (autograd's accumulation_target: the head's part of a tied table held here, or the
      // earlier micro-batches' gradient with accumulation); else a dense gradient of this rank's
      // piece of the table is made, which becomes the .grad (its pack beside it). ZeRO-3 has the
      // embedding's parameters gathered there, not the layers'.
      if (first && st.chunk == 0) {
        const double pack = packs > 0 && !accumulates ? embedding_unit * pbytes : 0.0;
        const double gathered = l.zero_stage >= 3 ? std::max(0.0, embedding_unit * pbytes - zero3_units) : 0.0;
        const bool into_grad = (last && m.tied) || (accumulates && !st.first);
        candidate((into_grad ? 0.0 : table_bytes) + pack + gathered);
      }
    }
    const double layer_work = grad_work + most_work + (full ? remade : 0.0);
    e.kept = kept_at;
    e.workspace = work_at;
    e.peak = held_state + dynamic;
    // One process without accumulation ends its backward holding every gradient: a peak of its own.
    if (l.dp() == 1 && !accumulates) e.peak = std::max(e.peak, held_state + e.gradients + layer_work);
    e.activations = std::max(0.0, e.peak - e.parameters - e.gradients - e.optimizer_state);
    if (e.peak > best.peak) best = e;
  }
  return best;
}

}  // namespace mf::plan
