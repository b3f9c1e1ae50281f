#include "meshflow/plan/profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include <omp.h>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/ops/ops.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/runtime/peak_flops.h"

namespace mf::plan {

namespace {

double median_seconds(int repeats, const std::function<void()>& f) {
  f();  // warm-up: allocations, page faults, library set-up
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Calls of f until `window_s` has passed, and the seconds they took (the last call's end).
struct Calls {
  double calls = 0, seconds = 0;
};
Calls calls_in(double window_s, const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  Calls c;
  while ((c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) < window_s) {
    f();
    ++c.calls;
  }
  return c;
}

// seconds = alpha + beta x bytes through the smallest and the largest message (robust to a noisy
// middle): beta from their difference, alpha what the smallest leaves; neither negative.
AlphaBeta alpha_beta(const std::vector<double>& bytes, const std::vector<double>& secs) {
  const size_t last = bytes.size() - 1;
  double beta = (secs[last] - secs[0]) / (bytes[last] - bytes[0]);
  if (beta <= 0) beta = secs[last] / bytes[last];
  return {std::max(0.0, secs[0] - beta * bytes[0]), beta};
}

Tensor randn_f32(const Shape& s, uint64_t seed) {
  Generator g(seed);
  Tensor t = empty(s, DType::kF32);
  normal_(t, 0.0, 1.0, &g);
  return t;
}

}  // namespace

HardwareProfile measure_profile(const comm::CommPtr& world, const ProfileOptions& o, std::FILE* out) {
  const int ranks = world ? world->size() : 1;
  const bool leader = !world || world->rank() == 0;
  auto barrier = [&] {
    if (world && ranks > 1) world->barrier()->wait();
  };
  if (!o.published.empty()) {
    MF_CHECK(o.published != "host" && !std::filesystem::exists(o.published), "profile --published: give a published "
             "profile's name (a100-80gb, h100-80gb), not '", o.published, "'");
    const HardwareProfile h = hardware_profile(o.published, ranks);
    if (leader) {
      write_file_atomic(o.output, profile_json(h));
      std::fprintf(out, "profile: wrote %s (%s's published figures)\n", o.output.c_str(), o.published.c_str());
    }
    return h;
  }
  HardwareProfile h;
  h.name = "host";
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  h.source = detail::cat("measured by meshflow profile on ", host, " with ", ranks, " ranks");
  h.ranks_per_node = ranks;
  const auto pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  h.memory_bytes = static_cast<double>(pages) * static_cast<double>(page) / ranks;
  // The FMA peak, one rank at a time (the others wait in a barrier): a core's own rate, as the
  // short kernels below measure theirs.
  double own_peak = 0;
  for (int r = 0; r < ranks; ++r) {
    barrier();
    if (!world || world->rank() == r) own_peak = runtime::measured_peak_flops();
  }
  barrier();
  h.peak_flops = parallel::mean_over(world.get(), own_peak);
  // GEMMs n x n x n: rate(x) = G x / (x + h), G the best rate measured, h the median of
  // x (G / rate - 1) over the smaller sizes (beyond the best the rate falls — with more ranks than
  // cores a 1024³ call outlasts a time slice — and read as "not yet at G" would make h huge).
  std::vector<double> xs, rates;
  for (int64_t n : {64, 128, 256, 512, 1024}) {
    const Tensor a = randn_f32({n, n}, 1), b = randn_f32({n, n}, 2);
    barrier();
    const double s = median_seconds(o.repeats, [&] { matmul(a, b); });
    const double flops = 2.0 * static_cast<double>(n * n * n);
    const double rate = parallel::mean_over(world.get(), flops / s);
    xs.push_back(flops);
    rates.push_back(rate);
    if (leader) std::fprintf(out, "profile: GEMM %lldx%lldx%lld %.1f GFLOP/s per rank\n", (long long)n, (long long)n, (long long)n, rate / 1e9);
  }
  const size_t best = static_cast<size_t>(std::max_element(rates.begin(), rates.end()) - rates.begin());
  h.gemm_flops = rates[best];
  std::vector<double> halves;
  for (size_t i = 0; i < best; ++i) halves.push_back(xs[i] * (h.gemm_flops / rates[i] - 1));
  std::sort(halves.begin(), halves.end());
  h.gemm_half_flops = halves.empty() ? 0.0 : halves[halves.size() / 2];
  // Attention (1, 4, 512, 64), causal: the FLOPs the model counts (4 T² D H, both halves).
  {
    const Tensor q = randn_f32({1, 4, 512, 64}, 3), k = randn_f32({1, 4, 512, 64}, 4), v = randn_f32({1, 4, 512, 64}, 5);
    AttentionOptions opts;
    opts.causal = true;
    barrier();
    const double s = median_seconds(o.repeats, [&] { scaled_dot_product_attention(q, k, v, opts); });
    h.attention_efficiency = parallel::mean_over(world.get(), 4.0 * 512 * 512 * 64 * 4 / s) / h.gemm_flops;
  }
  // The host's time per op: 1000 additions of one element.
  {
    const Tensor x = randn_f32({1}, 8);
    barrier();
    const double s = median_seconds(o.repeats, [&] {
      for (int i = 0; i < 1000; ++i) add(x, x);
    });
    h.op_overhead_s = parallel::mean_over(world.get(), s / 1000);
  }
  // Elementwise rates by size: c = a + b over tensors of 64 KB to 64 MB (three of them move;
  // repeated over the same tensors, as a layer's ops pass theirs on, so the small ones stay in
  // the caches), every rank adding for the same window: what a rank moves while all do, less its
  // time per op — a rank's share already (an addition of 64 MB outlasts a time slice: timed alone
  // it would measure neither a core's rate nor a share's). The largest is the memory bandwidth.
  // More threads than cores (ranks x OpenMP threads): a rank's share of a core is
  // cores / (ranks x threads).
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double share = std::min(1.0, cores / (static_cast<double>(ranks) * omp_get_max_threads()));
  for (int64_t elems = int64_t{1} << 14; elems <= int64_t{1} << 24; elems <<= 2) {
    const Tensor x = randn_f32({elems}, 6), y = randn_f32({elems}, 7);
    add(x, y);  // warm-up: the output's pages
    barrier();
    const Calls c = calls_in(0.05 * o.repeats, [&] { add(x, y); });
    const double busy_s = std::max(c.seconds - c.calls * h.op_overhead_s / share, 0.25 * c.seconds);
    h.memory_rates[4.0 * static_cast<double>(elems)] = parallel::mean_over(world.get(), 3.0 * 4 * static_cast<double>(elems) * c.calls / busy_s);
  }
  h.memory_bandwidth = h.memory_rates.rbegin()->second;
  // The short kernels timed alone above each ran on a core of their own between the others' time
  // slices: their rates are a whole core's, a rank's `share` of them (and its time per op
  // 1 / share of the measured).
  h.core_share = share;
  h.peak_flops *= share;
  h.gemm_flops *= share;
  h.op_overhead_s /= share;  // (the elementwise rates above are a rank's share already)
  if (leader)
    std::fprintf(out, "profile: peak %.1f GFLOP/s, GEMM fit %.1f GFLOP/s (half at %.3g FLOPs), attention %.0f%% of it, "
                 "memory %.1f GB/s, %.2f us per op (per rank, %d ranks, %.3g of a core's rate each)\n", h.peak_flops / 1e9,
                 h.gemm_flops / 1e9, h.gemm_half_flops, 100 * h.attention_efficiency, h.memory_bandwidth / 1e9,
                 h.op_overhead_s * 1e6, ranks, share);
  if (leader) {
    std::string rates;
    for (const auto& [bytes, rate] : h.memory_rates) rates += detail::cat(rates.empty() ? "" : ", ", bytes / 1024, " KB ", rate / 1e9);
    std::fprintf(out, "profile: elementwise GB/s per rank by tensor size: %s\n", rates.c_str());
  }
  // Collectives per group size (contiguous groups, all measuring at once), and neighbour
  // send/recv (half a ping-pong).
  h.intra = {5e-6, 1 / 5e9};
  for (int g = 2; world && g <= ranks; ++g) {
    if (ranks % g != 0) continue;
    comm::CommPtr group = world->split(world->rank() / g, world->rank());
    for (const char* op : {"all_reduce", "reduce_scatter", "all_gather"}) {
      std::vector<double> bytes, secs;
      for (int64_t kb : {4, 64, 1024, 8192}) {
        const int64_t elems = kb * 256 / g * g;  // f32, a multiple of the group
        Tensor whole = randn_f32({elems}, 9), piece = randn_f32({elems / g}, 10);
        barrier();
        const std::string name = op;
        const double s = median_seconds(o.repeats, [&] {
          if (name == "all_reduce") group->all_reduce(whole)->wait();
          else if (name == "reduce_scatter") group->reduce_scatter(whole, piece)->wait();
          else group->all_gather(piece, whole)->wait();
        });
        bytes.push_back(4.0 * static_cast<double>(elems));
        secs.push_back(s);
      }
      const AlphaBeta fit = alpha_beta(bytes, secs);
      h.collectives[detail::cat(op, "/", g)] = fit;
      if (leader)
        std::fprintf(out, "profile: %s over %d ranks: %.1f us + bytes / (%.3f GB/s)\n", op, g, fit.alpha_s * 1e6,
                     1e-9 / fit.beta_s_per_b);
    }
  }
  // A collective under load: every rank runs GEMMs between its group's small all-reduces, the
  // groups at different paces (1-3 GEMMs per call) so that a call meets the other groups
  // computing, as in a step; the time per call beyond the GEMMs alone is the least a blocking
  // collective of the group takes (with more ranks than cores: a time slice or so).
  if (world && ranks >= 2) {
    const Tensor a = randn_f32({256, 256}, 12), b = randn_f32({256, 256}, 13);
    Tensor small = randn_f32({1024}, 14);
    const int calls = 4 * o.repeats;
    for (int g = 2; g <= ranks; ++g) {
      if (ranks % g != 0) continue;
      comm::CommPtr group = world->split(world->rank() / g, world->rank());
      const int gemms = 1 + (world->rank() / g) % 3;
      auto loop_seconds = [&](bool collective) {
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) {
          for (int k = 0; k < gemms; ++k) matmul(a, b);
          if (collective) group->all_reduce(small)->wait();
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        barrier();
        return s;
      };
      loop_seconds(false);  // warm-up
      const double alone = loop_seconds(false), loaded = loop_seconds(true);
      h.loaded_alpha_s[g] = parallel::mean_over(world.get(), std::max(0.0, (loaded - alone) / calls));
      if (leader)
        std::fprintf(out, "profile: a collective over %d ranks while the others compute: at least %.1f us\n", g,
                     h.loaded_alpha_s[g] * 1e6);
    }
  }
  // A waiting rank's load (more ranks than cores): as many ranks as the cores run at once compute
  // GEMMs for a while, the others wait for a message as a pipeline rank waits for its input (the
  // communicator's wait, which polls); their GEMMs against all ranks' in the same time, when the
  // cores are the computing ranks' alone, tell what the waiting ones took.
  if (world && share < 1) {
    const Tensor a = randn_f32({128, 128}, 15), b = randn_f32({128, 128}, 16);
    const double capacity = share * ranks;  // ranks at their own rate at once
    const int busy = std::max(1, static_cast<int>(capacity));
    auto gemms_in = [&](double seconds) { return calls_in(seconds, [&] { matmul(a, b); }).calls; };
    const double window_s = 0.1 * o.repeats;
    barrier();
    const double all = parallel::sum_over(world.get(), gemms_in(window_s));
    barrier();
    Tensor note = randn_f32({1}, 17);
    double mine = 0;
    if (world->rank() < busy) {
      mine = gemms_in(window_s);
      if (world->rank() == 0)
        for (int r = busy; r < ranks; ++r) world->send(note, r, 9)->wait();
    } else {
      world->recv(note, 0, 9)->wait();
    }
    const double some = parallel::sum_over(world.get(), mine);
    // all: capacity's worth of work; some: min(busy, capacity - load x waiting)'s.
    const double done = capacity * some / all;
    h.waiting_load = std::clamp((std::min(static_cast<double>(busy), capacity) - done) / (ranks - busy), 0.0, 1.0);
    if (leader)
      std::fprintf(out, "profile: %d ranks computing while %d wait: %.2f ranks' work (of %.2f); a waiting rank takes %.3f\n",
                   busy, ranks - busy, done, std::min(static_cast<double>(busy), capacity), h.waiting_load);
  }
  if (world && ranks >= 2) {
    std::vector<double> bytes, secs;
    const int r = world->rank(), peer = r % 2 == 0 ? r + 1 : r - 1;
    for (int64_t kb : {4, 64, 1024, 8192}) {
      Tensor t = randn_f32({kb * 256}, 11);
      barrier();
      const double s = median_seconds(o.repeats, [&] {
        if (peer >= ranks) return;
        if (r % 2 == 0) {
          world->send(t, peer, 7)->wait();
          world->recv(t, peer, 8)->wait();
        } else {
          world->recv(t, peer, 7)->wait();
          world->send(t, peer, 8)->wait();
        }
      });
      bytes.push_back(4.0 * static_cast<double>(kb * 256));
      secs.push_back(s / 2);
    }
    h.intra = alpha_beta(bytes, secs);
    h.collectives["send_recv/2"] = h.intra;
    if (leader)
      std::fprintf(out, "profile: send/recv: %.1f us + bytes / (%.3f GB/s)\n", h.intra.alpha_s * 1e6,
                   1e-9 / h.intra.beta_s_per_b);
  }
  h.inter = h.intra;  // one host
  h.dp_overlap = 0;   // MPI progresses the bucket reductions only inside MPI calls
  if (leader) {
    write_file_atomic(o.output, profile_json(h));
    std::fprintf(out, "profile: wrote %s\n", o.output.c_str());
  }
  return h;
}

}  // namespace mf::plan
