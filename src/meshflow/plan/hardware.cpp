#include "meshflow/plan/hardware.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <omp.h>
#include <unistd.h>

#include "meshflow/core/error.h"
#include "meshflow/runtime/peak_flops.h"

namespace mf::plan {

double HardwareProfile::gemm_rate(double flops) const {
  return gemm_flops * flops / (flops + gemm_half_flops);
}

double HardwareProfile::memory_rate(double tensor_bytes) const {
  if (memory_rates.empty()) return memory_bandwidth;
  auto above = memory_rates.lower_bound(tensor_bytes);
  if (above == memory_rates.begin()) return above->second;
  if (above == memory_rates.end()) return std::prev(above)->second;
  const auto below = std::prev(above);
  const double w = std::log(tensor_bytes / below->first) / std::log(above->first / below->first);
  return below->second + w * (above->second - below->second);
}

double HardwareProfile::collective_seconds(const std::string& op, int64_t group, double bytes, bool crosses_nodes) const {
  if (group <= 1 && op != "send_recv") return 0;
  auto loaded = loaded_alpha_s.find(op == "send_recv" ? 2 : group);
  const double at_least = loaded != loaded_alpha_s.end() ? loaded->second : 0.0;
  auto fit = collectives.find(op + "/" + std::to_string(group));
  if (fit != collectives.end()) return std::max(at_least, fit->second.alpha_s) + fit->second.beta_s_per_b * bytes;
  const AlphaBeta& link = crosses_nodes ? inter : intra;
  const double n = static_cast<double>(group);
  if (op == "all_reduce") return 2 * (n - 1) * link.alpha_s + 2 * (n - 1) / n * bytes * link.beta_s_per_b;
  if (op == "reduce_scatter" || op == "all_gather" || op == "all_to_all")
    return (n - 1) * link.alpha_s + (n - 1) / n * bytes * link.beta_s_per_b;
  MF_CHECK(op == "send_recv", "plan: unknown collective ", op);
  return link.seconds(bytes);
}

namespace {

// Published figures. A100 80GB SXM (DGX A100, as Megatron-LM's Selene): 312 TFLOP/s dense bf16,
// 2039 GB/s HBM2e, NVLink 3 at 300 GB/s per direction, eight 200 Gb/s HDR InfiniBand adapters per
// node (25 GB/s per GPU). H100 80GB SXM (DGX H100): 989 TFLOP/s dense bf16, 3.35 TB/s HBM3, NVLink
// 4 at 450 GB/s per direction, eight 400 Gb/s NDR adapters per node (50 GB/s per GPU). Sustained
// GEMM rate: 80% (A100) and 75% (H100) of peak on large bf16 GEMMs; NCCL's ring buses at about
// 80% of the link rate.
HardwareProfile gpu(const std::string& name, double peak, double gemm_share, double half, double hbm, double nvlink,
                    double ib) {
  HardwareProfile h;
  h.name = name;
  h.source = "published figures (docs/architecture/planning.md, \"Auto-parallel planning\")";
  h.peak_flops = peak;
  h.gemm_flops = gemm_share * peak;
  h.gemm_half_flops = half;
  h.attention_efficiency = 0.6;
  h.memory_bandwidth = hbm;
  h.memory_bytes = 80e9;
  h.ranks_per_node = 8;
  h.intra = {8e-6, 1 / (0.8 * nvlink)};
  h.inter = {15e-6, 1 / (0.8 * ib)};
  h.dp_overlap = 0.9;
  h.op_overhead_s = 8e-6;
  h.native_half = true;
  return h;
}

// This machine: the measured FMA peak, shared by the ranks; the rest defaults until `meshflow
// profile` measures it (MPI over shared memory: 5 µs, 5 GB/s).
HardwareProfile host(int64_t ranks) {
  HardwareProfile h;
  h.name = "host";
  h.source = "this machine's measured FMA peak; other rates default (run meshflow profile to measure them)";
  // The whole machine's peak from this process's (its OpenMP threads'), shared by the ranks.
  const double share = 1.0 / static_cast<double>(std::max<int64_t>(1, ranks));
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  h.peak_flops = runtime::measured_peak_flops() / omp_get_max_threads() * cores * share;
  h.core_share = std::min(1.0, cores / (static_cast<double>(std::max<int64_t>(1, ranks)) * omp_get_max_threads()));
  h.gemm_flops = 0.8 * h.peak_flops;
  h.gemm_half_flops = 2e7;
  h.memory_bandwidth = 20e9 * share;
  const auto pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  h.memory_bytes = static_cast<double>(pages) * static_cast<double>(page) * share;
  h.ranks_per_node = std::max<int64_t>(1, ranks);
  h.intra = {5e-6, 1 / 5e9};
  h.inter = h.intra;
  h.dp_overlap = 0;
  h.op_overhead_s = 2e-5;
  return h;
}

}  // namespace

HardwareProfile hardware_profile(const std::string& name, int64_t ranks) {
  if (name.empty() || name == "host") return host(ranks);
  if (name == "a100-80gb") return gpu(name, 312e12, 0.8, 2e9, 2039e9, 300e9, 25e9);
  if (name == "h100-80gb") return gpu(name, 989e12, 0.75, 6e9, 3350e9, 450e9, 50e9);
  MF_CHECK(std::filesystem::exists(name), "plan: unknown hardware profile '", name,
           "': give host, a100-80gb, h100-80gb or a file written by `meshflow profile`");
  return load_profile(name);
}

std::string profile_json(const HardwareProfile& h) {
  nlohmann::ordered_json j;
  j["name"] = h.name;
  j["source"] = h.source;
  j["peak_flops"] = h.peak_flops;
  j["gemm_flops"] = h.gemm_flops;
  j["gemm_half_flops"] = h.gemm_half_flops;
  j["attention_efficiency"] = h.attention_efficiency;
  j["attention_score_bytes"] = h.attention_score_bytes;
  j["attention_score_kept_bytes"] = h.attention_score_kept_bytes;
  j["memory_bandwidth"] = h.memory_bandwidth;
  nlohmann::ordered_json rates = nlohmann::ordered_json::object();
  for (const auto& [bytes, rate] : h.memory_rates) rates[std::to_string(static_cast<int64_t>(bytes))] = rate;
  j["memory_rates"] = rates;
  j["memory_bytes"] = h.memory_bytes;
  j["ranks_per_node"] = h.ranks_per_node;
  j["intra"] = {{"alpha_s", h.intra.alpha_s}, {"beta_s_per_byte", h.intra.beta_s_per_b}};
  j["inter"] = {{"alpha_s", h.inter.alpha_s}, {"beta_s_per_byte", h.inter.beta_s_per_b}};
  nlohmann::ordered_json coll = nlohmann::ordered_json::object();
  for (const auto& [k, v] : h.collectives) coll[k] = {{"alpha_s", v.alpha_s}, {"beta_s_per_byte", v.beta_s_per_b}};
  j["collectives"] = coll;
  nlohmann::ordered_json loaded = nlohmann::ordered_json::object();
  for (const auto& [g, v] : h.loaded_alpha_s) loaded[std::to_string(g)] = v;
  j["loaded_alpha_s"] = loaded;
  j["dp_overlap"] = h.dp_overlap;
  j["op_overhead_s"] = h.op_overhead_s;
  j["native_half"] = h.native_half;
  j["core_share"] = h.core_share;
  j["waiting_load"] = h.waiting_load;
  return j.dump(2) + "\n";
}

HardwareProfile load_profile(const std::string& path) {
  MF_CHECK(!std::filesystem::is_directory(path), "plan: the hardware profile ", path,
           " is a folder; give the file meshflow profile --output wrote");
  std::ifstream in(path);
  MF_CHECK(in.good(), "plan: cannot read the hardware profile ", path);
  return parse_profile(std::string(std::istreambuf_iterator<char>(in), {}), path);
}

HardwareProfile parse_profile(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    HardwareProfile h;
    h.name = j.at("name").get<std::string>();
    h.source = j.value("source", path);
    h.peak_flops = j.at("peak_flops").get<double>();
    h.gemm_flops = j.at("gemm_flops").get<double>();
    h.gemm_half_flops = j.at("gemm_half_flops").get<double>();
    h.attention_efficiency = j.at("attention_efficiency").get<double>();
    h.attention_score_bytes = j.value("attention_score_bytes", 0.0);
    h.attention_score_kept_bytes = j.value("attention_score_kept_bytes", 0.0);
    h.memory_bandwidth = j.at("memory_bandwidth").get<double>();
    if (j.contains("memory_rates"))
      for (const auto& [k, v] : j.at("memory_rates").items()) {
        const double bytes = std::stod(k), rate = v.get<double>();
        MF_CHECK(bytes > 0 && rate > 0, "memory_rates: sizes and rates must be positive, not ", k, ": ", rate);
        h.memory_rates[bytes] = rate;
      }
    h.memory_bytes = j.at("memory_bytes").get<double>();
    h.ranks_per_node = j.at("ranks_per_node").get<int64_t>();
    auto ab = [](const nlohmann::json& o) { return AlphaBeta{o.at("alpha_s").get<double>(), o.at("beta_s_per_byte").get<double>()}; };
    h.intra = ab(j.at("intra"));
    h.inter = ab(j.at("inter"));
    for (const auto& [k, v] : j.at("collectives").items()) h.collectives[k] = ab(v);
    if (j.contains("loaded_alpha_s"))
      for (const auto& [k, v] : j.at("loaded_alpha_s").items()) h.loaded_alpha_s[std::stoll(k)] = v.get<double>();
    h.dp_overlap = j.at("dp_overlap").get<double>();
    h.op_overhead_s = j.at("op_overhead_s").get<double>();
    h.native_half = j.value("native_half", false);
    h.core_share = j.value("core_share", 1.0);
    h.waiting_load = j.value("waiting_load", 0.0);
    MF_CHECK(h.core_share > 0 && h.core_share <= 1, "core_share must be in (0, 1], not ", h.core_share);
    MF_CHECK(h.waiting_load >= 0 && h.waiting_load <= 1, "waiting_load must be in [0, 1], not ", h.waiting_load);
    MF_CHECK(h.peak_flops > 0 && h.gemm_flops > 0 && h.memory_bandwidth > 0, "rates must be positive");
    MF_CHECK(h.attention_score_bytes >= 0 && h.attention_score_kept_bytes >= 0,
             "attention_score_bytes and attention_score_kept_bytes must be >= 0");
    return h;
  } catch (const nlohmann::json::exception& e) {
    MF_THROW("plan: the hardware profile ", path, " is not one `meshflow profile` writes: ", e.what());
  } catch (const Error& e) {
    MF_THROW("plan: the hardware profile ", path, ": ", e.what());
  }
}

}  // namespace mf::plan
