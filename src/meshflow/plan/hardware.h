// What the time model knows of the machine: per-rank compute rates, memory, and the cost of each
// collective by group size (α-β: seconds = alpha + beta x bytes). From `meshflow profile` (this
// machine, measured through the real communicator) or from published figures (GPU clusters).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace mf::plan {

struct AlphaBeta {
  double alpha_s = 0;        // seconds per call
  double beta_s_per_b = 0;   // seconds per byte of the message (the tensor a rank passes in)
  double seconds(double bytes) const { return alpha_s + beta_s_per_b * bytes; }
};

struct HardwareProfile {
  std::string name;
  std::string source;                 // "measured by meshflow profile on <host>" or the figures' origin
  double peak_flops = 0;              // per rank: the MFU denominator
  double gemm_flops = 0;              // per rank: large GEMMs, sustained
  double gemm_half_flops = 0;         // FLOPs per GEMM call at which it runs at half of gemm_flops
  double attention_efficiency = 0.5;  // attention's rate as a share of gemm_flops
  // The attention the runtime runs. 0, 0: fused (meshflow's kernels, flash attention): the scores
  // never leave the kernel. An unfused attention (two batched GEMMs around a softmax, as
  // Megatron-LM's of 2021) writes every score (micro-batch x heads x seq x seq) to memory:
  // `attention_score_bytes` per score move through memory in forward (backward counted twice
  // that, as every op's), `attention_score_kept_bytes` per score stay for backward (none under
  // selective recomputation).
  double attention_score_bytes = 0, attention_score_kept_bytes = 0;
  double memory_bandwidth = 0;        // bytes/s per rank: streams larger than the caches (the optimizer)
  // An elementwise op's rate by the size of one of its tensors (bytes -> bytes/s per rank): one
  // whose tensors stay in the caches between ops runs faster than memory_bandwidth. Measured by
  // `meshflow profile`; empty (published profiles): memory_bandwidth at every size.
  std::map<double, double> memory_rates;
  double memory_bytes = 0;            // per rank
  int64_t ranks_per_node = 1;
  // Point-to-point links: within a node and between nodes (ring collectives are built on them
  // when no measured fit of the collective exists).
  AlphaBeta intra, inter;
  // Measured fits by "<op>/<group size>" (op: all_reduce, reduce_scatter, all_gather, send_recv);
  // bytes: the whole tensor (all_reduce's, reduce_scatter's input, all_gather's output, the message).
  std::map<std::string, AlphaBeta> collectives;
  // Seconds a blocking collective over a group of this size takes at least when the ranks compute
  // between calls, as in a step (each call waits for the group's last member to arrive; with more
  // ranks than cores, to be scheduled): measured by `meshflow profile`, replaces a smaller alpha.
  std::map<int64_t, double> loaded_alpha_s;
  // Share of the data-parallel gradient reduction hidden behind backward.
  double dp_overlap = 0;
  // bf16/f16 models run in half precision (GPUs): activations take the parameter dtype's bytes.
  bool native_half = false;
  // Time the host spends per op it launches (autograd, allocation, dispatch), seconds.
  double op_overhead_s = 0;
  // A rank's share of a core when every rank computes (cores / (ranks x threads) when the ranks
  // oversubscribe the cores, else 1): the rates above are that share's; a rank alone runs at
  // rate / core_share.
  double core_share = 1;
  // With more ranks than cores: the share of the cores' capacity (in ranks at their own rate) a
  // rank waiting for a message takes — it polls. Measured by `meshflow profile`; 0 otherwise.
  double waiting_load = 0;

  // GEMM rate for a call of `flops` FLOPs: gemm_flops * flops / (flops + gemm_half_flops).
  double gemm_rate(double flops) const;
  // An elementwise op's bytes/s over tensors of `tensor_bytes` each: memory_rates interpolated in
  // log size (held at its ends), else memory_bandwidth.
  double memory_rate(double tensor_bytes) const;
  // Seconds of `op` over `group` ranks for a whole tensor of `bytes` (as in `collectives`): the
  // measured fit, else a ring over the links; `crosses_nodes`: the group spans nodes.
  double collective_seconds(const std::string& op, int64_t group, double bytes, bool crosses_nodes) const;
};

// "a100-80gb", "h100-80gb" (published figures), a profile file written by `meshflow profile`
// (JSON), or "" / "host": this machine — its measured FMA peak and defaults for the rest,
// shared by `ranks` processes. Throws naming the known profiles.
HardwareProfile hardware_profile(const std::string& name, int64_t ranks);
// The profile as JSON (what `meshflow profile` writes, and load_profile reads).
std::string profile_json(const HardwareProfile& h);
HardwareProfile load_profile(const std::string& path);
// The profile from its JSON text; `where` names it in errors.
HardwareProfile parse_profile(const std::string& json, const std::string& where);

}  // namespace mf::plan
