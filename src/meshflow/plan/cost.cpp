#include "meshflow/plan/cost.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "meshflow/parallel/pipeline_schedule.h"
#include "meshflow/plan/pipeline_sim.h"

namespace mf::plan {

namespace {

// More ranks than cores (the profile's rates are a rank's share of a core when all compute), for
// the optimizer's sweep, where every stage steps at once: a rank done with its own yields its core
// to the busy ones, so no set of ranks is slower than its work spread over the cores it can use —
// `slots` = ranks x share whole cores, at most one a rank. `stage_s`: each pipeline stage's seconds
// at the shared rate (its dp x tp ranks alike); the j busiest stages' work over min(slots, their
// ranks), the largest over j.
double spread_over_cores(std::vector<double> stage_s, double per_stage, double slots, double share) {
  std::sort(stage_s.begin(), stage_s.end(), std::greater<>());
  double busiest = 0, bound = 0;
  for (size_t j = 0; j < stage_s.size(); ++j) {
    busiest += stage_s[j];
    bound = std::max(bound, busiest * per_stage * share / std::min(slots, per_stage * static_cast<double>(j + 1)));
  }
  return bound;
}

}  // namespace

StepTime estimate_step_time(const ModelCosts& m, const Layout& l, const HardwareProfile& h,
                            const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  // This rank's tokens of a micro-batch (its slice of each sequence under context parallelism);
  // its queries still attend to every key (T).
  const double cp = static_cast<double>(l.cp());
  const double tokens = static_cast<double>(l.micro_batch * m.seq) / cp;
  const double tp = static_cast<double>(l.tp()), C = static_cast<double>(m.hidden), T = static_cast<double>(m.seq);
  const double V = static_cast<double>(m.vocab), act = static_cast<double>(m.act_bytes), pbytes = static_cast<double>(m.param_bytes);
  const bool full = l.recompute == Recompute::kFull, selective = l.recompute == Recompute::kSelective;
  // Forward seconds of one layer for a micro-batch: its four GEMMs (split / tp each), attention,
  // the elementwise ops' traffic and the host's time per op (about 30 ops per layer).
  auto layer_forward = [&](int64_t layer) {
    const double matrix = static_cast<double>(m.layer_params[static_cast<size_t>(layer)].split) / tp;
    const double gemm_flops = 2 * tokens * matrix;
    const double gemm_s = gemm_flops / h.gemm_rate(gemm_flops / 4);
    // An unfused attention moves every score (heads / tp x T per token, the masked included)
    // through memory; selective recomputation makes them again.
    const double scores = tokens * static_cast<double>(m.heads) / tp * T * m.score_bytes;
    const double scores_s = scores > 0 ? scores / h.memory_rate(scores) : 0.0;
    const double attention_s = 4 * tokens * T * C / tp / (h.gemm_flops * h.attention_efficiency) + scores_s;
    const LayerActivations& a = m.layer_acts.at(static_cast<size_t>(layer));
    const double kept = a.sequence / (l.sequence_parallel ? tp : 1.0) + a.gathered + a.split / tp;
    // Each op's tensors are about a (tokens, C) activation's (1/tp of it under sequence
    // parallelism): in the caches or not by that size.
    const double tensor = tokens * C * act / (l.sequence_parallel ? tp : 1.0);
    const double elementwise_s = 2 * tokens * kept * act / h.memory_rate(tensor);
    return std::make_pair(gemm_s + attention_s + elementwise_s + 15 * h.op_overhead_s, attention_s);
  };
  const double head_tokens = tokens * m.head_token_share;  // the rows the head projects
  const double head_flops = 2 * head_tokens * V * C / tp;
  const double logits = head_tokens * V / tp * act;  // bytes of the rank's logits
  // (No head matrix, no head time: the rates of nothing are 0.)
  const double head_forward = head_flops > 0 ? head_flops / h.gemm_rate(head_flops) + 3 * logits / h.memory_rate(logits) : 0.0;
  // The embedding's backward makes a dense gradient of the rank's table piece each micro-batch
  // (zeroed, then the rows added).
  const double table_s = 2 * std::ceil(V / tp) * C * act / h.memory_bandwidth;
  // Per micro-batch seconds of each chunk's forward and backward on each pipeline rank: backward
  // twice the forward, recomputation's extra forward; with accumulation, the gradients added into
  // .grad (two reads, a write).
  // (The first micro-batch's backward makes .grad; each later one adds into it.)
  const double adds = static_cast<double>(l.accumulation - 1) / static_cast<double>(l.accumulation);
  const auto add_s = [&](double params) { return adds * 3 * params * pbytes / h.memory_bandwidth; };
  double slowest = 0, all_stages = 0;
  int64_t layers_slowest = 0, remade_slowest = 0;  // the slowest rank's layers, and those recomputed fully
  std::vector<double> stage_params;  // each pipeline rank's parameters
  std::vector<std::vector<double>> forward_s(static_cast<size_t>(l.pp())), backward_s(static_cast<size_t>(l.pp()));
  for (int64_t s = 0; s < l.pp(); ++s) {
    double t = 0, params = 0;
    int64_t layers = 0, remade = 0;
    for (int64_t k = 0; k < l.virtual_stages; ++k) {
      double f = 0, b = 0, chunk_params = 0;
      if (s == 0 && k == 0) {
        b += table_s;
        chunk_params += static_cast<double>(m.embedding.on_rank(l.tp()));
      }
      const auto [first, end] = ranges[static_cast<size_t>(k * l.pp() + s)];
      for (int64_t layer = first; layer < end; ++layer) {
        chunk_params += static_cast<double>(m.layer_params[static_cast<size_t>(layer)].on_rank(l.tp()));
        const auto [lf, attention] = layer_forward(layer);
        const bool recomputed = l.recompute != Recompute::kNone && layer < l.recompute_layers;
        f += lf;
        b += 2 * lf + (recomputed && full ? lf : 0.0) + (recomputed && selective ? attention : 0.0);
        ++layers;
        remade += recomputed && full ? 1 : 0;
      }
      if (s == l.pp() - 1 && k == l.virtual_stages - 1) {
        f += head_forward;
        b += 2 * head_forward + (full ? head_forward : 0.0);
        chunk_params += static_cast<double>(m.head.on_rank(l.tp()) + (l.pp() > 1 && m.tied ? m.tied_copy.on_rank(l.tp()) : 0));
      }
      b += add_s(chunk_params);
      forward_s[static_cast<size_t>(s)].push_back(f);
      backward_s[static_cast<size_t>(s)].push_back(b);
      t += f + b;
      params += chunk_params;
    }
    all_stages += t;
    stage_params.push_back(params);
    if (t > slowest) {
      slowest = t;
      layers_slowest = layers;
      remade_slowest = remade;
    }
  }
  const double m_micro = static_cast<double>(l.accumulation);
  StepTime st;
  st.compute_s = m_micro * slowest;
  const double per_stage = static_cast<double>(l.dp() * l.cp() * l.tp());
  const double slots = h.core_share * per_stage * static_cast<double>(l.pp());
  if (l.pp() > 1) {
    // The schedule run action by action (plan/pipeline_sim.h): the fill and drain, a stage slower
    // than the others, and with more ranks than cores the cores the waiting ranks leave the busy
    // ones (less what the waiting take) — its seconds less the compute are the bubble.
    PipelineRun run;
    run.schedule = parallel::parse_pipeline_schedule(l.schedule);
    run.stages = l.pp();
    run.chunks = l.virtual_stages;
    run.micro_batches = l.accumulation;
    run.forward_s = forward_s;
    run.backward_s = backward_s;
    if (h.core_share < 1) {
      // At a process's own rate (the profile's rates are its share of a core when all compute).
      for (auto* seconds : {&run.forward_s, &run.backward_s})
        for (auto& rank : *seconds)
          for (double& x : rank) x *= h.core_share;
      run.processes_per_stage = per_stage;
      run.capacity = slots;
      run.waiting_load = h.waiting_load;
      st.compute_s = m_micro * all_stages / static_cast<double>(l.pp());  // the mean rank's work
    }
    st.bubble_s = std::max(0.0, simulate_pipeline(run) - st.compute_s);
  }
  // Tensor parallelism: per layer two all-reduces of the (tokens, C) activation forward (after the
  // attention's and the MLP's row-split GEMMs) and two backward (before their column-split ones);
  // sequence parallel: an all-gather and a reduce-scatter for each all-reduce forward, and their
  // transposes backward. A fully recomputed layer's forward runs its collectives again; the
  // embedding and the head add about one forward's and one backward's. The runtime waits for each.
  const bool tp_crosses = l.tp() > h.ranks_per_node;
  const double act_bytes = tokens * C * act;
  const double tp_one = l.sequence_parallel ? h.collective_seconds("all_gather", l.tp(), act_bytes, tp_crosses) +
                                                  h.collective_seconds("reduce_scatter", l.tp(), act_bytes, tp_crosses)
                                            : h.collective_seconds("all_reduce", l.tp(), act_bytes, tp_crosses);
  const double tp_calls = 4 * static_cast<double>(layers_slowest) + 2 * static_cast<double>(remade_slowest) + 2;
  st.tp_comm_s = l.tp() > 1 ? m_micro * tp_calls * tp_one : 0.0;
  // Context parallelism, per layer and micro-batch (global/ring_attention.h): the keys and values
  // (this rank's tokens x C / tp each, the key/value heads repeated) passed cp - 1 times forward
  // and again backward, where their gradients' accumulators pass cp times; causal chunks
  // load-balanced move half of q, k, v and the output forward and of the output's gradient, dq,
  // dk and dv backward. all_to_all instead: four all-to-alls (q, k, v, out) each way. The
  // runtime waits for them (MPI progresses inside its calls): counted whole.
  if (l.cp() > 1) {
    const bool cp_crosses = l.cp() * l.tp() > h.ranks_per_node;
    const double piece = tokens * C / tp * act;  // a (tokens, C / tp) activation of this rank
    double per_layer = 0;
    if (l.context_all_to_all) {
      per_layer = 8 * h.collective_seconds("all_to_all", l.cp(), piece, cp_crosses);
    } else {
      const double send = h.collective_seconds("send_recv", 2, 2 * piece, cp_crosses);  // keys and values
      per_layer = (cp - 1) * send + (cp - 1) * send + cp * send;
      // (Counted for every model: an encoder's chunks are not moved, a small overestimate there.)
      per_layer += 8 * h.collective_seconds("send_recv", 2, piece / 2, cp_crosses);
    }
    const double layers = static_cast<double>(layers_slowest) + static_cast<double>(remade_slowest);
    st.cp_comm_s = m_micro * layers * per_layer;
  }
  // Pipeline: each micro-batch's activation forward and its gradient back, per chunk.
  const bool pp_crosses = l.tp() * l.dp() * 2 > h.ranks_per_node;
  const double message = act_bytes / (l.sequence_parallel ? tp : 1.0);
  st.pp_comm_s = l.pp() > 1 ? m_micro * 2 * static_cast<double>(l.virtual_stages) * h.collective_seconds("send_recv", 2, message, pp_crosses) : 0.0;
  // Data parallelism: the gradients' reduction (ZeRO 2/3: a reduce-scatter), partly hidden behind
  // backward; ZeRO's all-gather of the updated parameters after the step; ZeRO-3's gathers of
  // every unit in forward and again in backward, prefetched like the reduction.
  // The first stage's parameters, and its units (the embedding, each layer, and without a
  // pipeline the head): ZeRO-2/3 reduce and gather unit by unit.
  double rank_params = 0, units = 1, tensors = static_cast<double>(m.embedding.tensors);
  for (int64_t k = 0; k < l.virtual_stages; ++k) {
    const auto [a, b] = ranges[static_cast<size_t>(k * l.pp())];
    for (int64_t layer = a; layer < b; ++layer) {
      rank_params += static_cast<double>(m.layer_params[static_cast<size_t>(layer)].on_rank(l.tp()));
      tensors += static_cast<double>(m.layer_params[static_cast<size_t>(layer)].tensors);
    }
    units += static_cast<double>(b - a);
  }
  rank_params += static_cast<double>(m.embedding.on_rank(l.tp()));
  if (l.pp() == 1) {
    rank_params += static_cast<double>(m.head.on_rank(l.tp()));
    tensors += static_cast<double>(m.head.tensors);
    units += 1;
  }
  const double grad_bytes = rank_params * pbytes;
  // (Under context parallelism the gradients are reduced over dp x cp: ZeRO-2/3 reduce-scatter
  // over dp, then sum their slices over cp.)
  const int64_t grad_ranks = l.dp() * l.cp();
  if (grad_ranks > 1) {
    const bool dp_crosses = grad_ranks * l.tp() > h.ranks_per_node;
    const double hidden = 1 - h.dp_overlap;
    // Calls: one per unit (ZeRO-2/3), else one per gradient bucket.
    const double calls = l.zero_stage >= 2 ? units : std::max(1.0, std::ceil(grad_bytes / (m.grad_bucket_mb * 1048576.0)));
    const double reduce =
        calls * h.collective_seconds(l.zero_stage >= 2 ? "reduce_scatter" : "all_reduce",
                                     l.zero_stage >= 2 ? l.dp() : grad_ranks, grad_bytes / calls, dp_crosses) +
        (l.zero_stage >= 2 ? calls * h.collective_seconds("all_reduce", l.cp(), grad_bytes / calls / static_cast<double>(l.dp()),
                                                          dp_crosses)
                           : 0.0);
    // ZeRO-1/2 gather the updated parameters after the step one tensor at a time (ZeRO-3's
    // slices are the parameters: nothing to gather then).
    const double gather = tensors * h.collective_seconds("all_gather", l.dp(), grad_bytes / tensors, dp_crosses);
    const double unit_gathers = units * h.collective_seconds("all_gather", l.dp(), grad_bytes / units, dp_crosses);
    // The exchange's own copies, at the memory bandwidth (bytes of the gradients or parameters
    // read and written): the gradients into their buckets (2) or, ZeRO-2/3, into a zeroed pack
    // for the reduce-scatter (3); ZeRO-1/2 the gathered parameters into place (2); ZeRO-3 every
    // unit gathered into place forward and backward of every micro-batch (2 each).
    double copies = l.zero_stage >= 2 ? 3.0 : 2.0;
    if (l.zero_stage == 1 || l.zero_stage == 2) copies += 2;
    if (l.zero_stage >= 3) copies += 4 * m_micro;
    st.dp_comm_s = hidden * reduce + (l.zero_stage == 1 || l.zero_stage == 2 ? gather : 0.0) +
                   (l.zero_stage >= 3 ? hidden * 2 * m_micro * unit_gathers : 0.0) + copies * grad_bytes / h.memory_bandwidth;
  }
  // Clipping (one read of the gradients) and AdamW (parameters, gradients, moments read, three written).
  // Every stage steps its own parameters at once; with more ranks than cores, the stages with
  // fewer finish first and lend their cores to the others (spread_over_cores).
  std::vector<double> opt_s;
  for (double p : stage_params)
    opt_s.push_back(p / (l.zero_stage >= 1 ? static_cast<double>(l.dp()) : 1.0) * (4 + 28 + (m.amp ? 8 : 0)) / h.memory_bandwidth);
  const double heaviest = *std::max_element(opt_s.begin(), opt_s.end());
  st.optimizer_s = h.core_share < 1 ? std::max(spread_over_cores(opt_s, per_stage, slots, h.core_share),
                                               heaviest * h.core_share * std::max(1.0, per_stage / slots))
                                    : heaviest;
  return st;
}

}  // namespace mf::plan
