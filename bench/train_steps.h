// The timed training steps shared by the model benchmarks: full steps (forward, backward,
// clipping at 1.0, AdamW) of `model` on one synthetic batch, tokens/s (mean of the steps after
// the first, which pays for first-touch allocations) and MFU = tokens/s * flops_per_token /
// measured peak (every thread running AVX-512 FMAs). Then one more step recorded by the timeline
// recorder gives where the time goes: each op class, the sgemm kernels by shape with their
// GFLOP/s, clipping + AdamW, and what no op covers (MESHFLOW_BENCH_NO_BREAKDOWN=1: skipped).
#pragma once
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "meshflow/core/trace.h"
#include "meshflow/models/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/runtime/peak_flops.h"

namespace mfb {

// One training step (forward, backward, clipping at 1.0, AdamW): its loss and the seconds to the
// end of the forward, of the backward and of the update.
struct StepTimes {
  mf::Tensor loss;
  double forward_s = 0, backward_end_s = 0, total_s = 0;
};
inline StepTimes train_step(mf::models::Model& model, const mf::models::Batch& batch, mf::optim::AdamW& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  StepTimes r;
  opt.zero_grad();
  r.loss = model.loss(batch);
  r.forward_s = since();
  r.loss.backward();
  r.backward_end_s = since();
  // As the trainer clips: the factor goes to AdamW, which applies it as it reads the gradients.
  opt.set_grad_scale(mf::optim::clip_factor(mf::optim::grad_norm(model.parameters()), 1.0));
  opt.step();
  r.total_s = since();
  return r;
}

// The class of a recorded op span ("matmul", "gelu backward", ...): where a step's time goes.
inline const char* op_class(const std::string& name) {
  const std::string op = name.substr(0, name.find_first_of(" ("));
  if (op == "matmul" || op == "linear" || op == "affine" || op == "bmm" || op == "mm") return "GEMM";
  if (op.find("attention") != std::string::npos) return "attention";
  if (op.find("norm") != std::string::npos) return "norms";
  if (op.find("cross_entropy") != std::string::npos || op.find("softmax") != std::string::npos) return "loss head";
  if (op == "reshape" || op == "permute" || op == "expand" || op == "contiguous" || op == "transpose" ||
      op == "view" || op == "slice" || op == "cat" || op == "split" || op == "select" || op == "narrow" ||
      op == "unbind")
    return "layout copies";
  if (op == "embedding" || op.find("index") != std::string::npos) return "embedding";
  return "elementwise";
}

// One step recorded by the timeline recorder (core/trace.h): the time of each op class (forward
// ops and their backward nodes, each span's time without the spans nested in it), clipping +
// AdamW, and what no op span covers (the autograd engine, allocation, the glue between ops).
inline void print_step_breakdown(mf::models::Model& model, const mf::models::Batch& batch,
                                 mf::optim::AdamW& opt, double peak) {
  mf::trace::start();
  const StepTimes t = train_step(model, batch, opt);
  std::vector<mf::trace::Event> ev = mf::trace::stop();
  std::vector<const mf::trace::Event*> spans;
  double gemm_kernel_flops = 0;
  struct GemmShape {
    int calls = 0;
    double flops = 0, seconds = 0;
  };
  std::map<std::string, GemmShape> gemms;  // by "op(A)op(B) MxNxK"
  for (const auto& e : ev) {
    const std::string cat = e.cat;
    if (e.ph != 'X' || e.tid != 0 || (cat != "op" && cat != "op_backward" && cat != "kernel")) continue;
    spans.push_back(&e);
    if (cat == "kernel") {  // args "flops":F,"shape":"NT MxNxK"
      const double flops = std::atof(e.args.c_str() + e.args.find(':') + 1);
      const size_t q = e.args.find("\"shape\":\"") + 9;
      GemmShape& g = gemms[e.args.substr(q, e.args.size() - q - 1)];
      ++g.calls;
      g.flops += flops;
      g.seconds += static_cast<double>(e.end_ns - e.start_ns) / 1e9;
      gemm_kernel_flops += flops;
    }
  }
  std::sort(spans.begin(), spans.end(), [](auto* a, auto* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
  });
  // Exclusive time: a span's time less that of the spans directly nested in it.
  std::map<std::string, double> by_class, by_op;
  std::vector<const mf::trace::Event*> stack;
  std::vector<double> self;
  auto close = [&] {
    const std::string name = std::string(stack.back()->cat) == "kernel" ? "sgemm kernel" : stack.back()->name;
    by_class[name == "sgemm kernel" ? "GEMM kernels (sgemm)" : op_class(name)] += self.back();
    by_op[name] += self.back();
    stack.pop_back();
    self.pop_back();
  };
  for (auto* e : spans) {
    while (!stack.empty() && stack.back()->end_ns <= e->start_ns) close();
    const double s = static_cast<double>(e->end_ns - e->start_ns) / 1e9;
    if (!stack.empty()) self.back() -= s;
    stack.push_back(e);
    self.push_back(s);
  }
  while (!stack.empty()) close();
  double covered = 0;
  for (const auto& [k, v] : by_class) covered += v;
  const double fwd_bwd = t.backward_end_s, optim = t.total_s - t.backward_end_s, step = t.total_s;
  by_class["optimizer (clip + AdamW)"] = optim;
  by_class["other (autograd, allocation, glue)"] = fwd_bwd - covered;
  std::printf("step breakdown (one recorded step, %.3f s, loss %.4f):\n", step, t.loss.item());
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [k, v] : by_class) rows.emplace_back(v, k);
  std::sort(rows.rbegin(), rows.rend());
  for (const auto& [v, k] : rows) {
    std::printf("  %-36s %8.3f s %6.1f%%", k.c_str(), v, 100.0 * v / step);
    if (k == "GEMM kernels (sgemm)")
      std::printf("   %.1f GFLOP/s, %.0f%% of peak (%.1f GFLOP)", gemm_kernel_flops / v / 1e9, 100.0 * gemm_kernel_flops / v / peak,
                  gemm_kernel_flops / 1e9);
    if (k == "GEMM") std::printf("   the GEMM ops' work around their kernels (bias, reductions, copies)");
    std::printf("\n");
  }
  std::vector<std::pair<double, std::string>> shapes;
  for (const auto& [k, g] : gemms) shapes.emplace_back(g.seconds, k);
  std::sort(shapes.rbegin(), shapes.rend());
  std::printf("  sgemm calls by shape (N: as stored, T: transposed):\n");
  for (const auto& [v, k] : shapes)
    std::printf("    %-26s %3d calls %8.3f s %7.1f GFLOP/s %4.0f%% of peak\n", k.c_str(), gemms[k].calls, v,
                gemms[k].flops / v / 1e9, 100.0 * gemms[k].flops / v / peak);
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [k, v] : by_op) ops.emplace_back(v, k);
  std::sort(ops.rbegin(), ops.rend());
  std::printf("  largest op spans:");
  for (size_t i = 0; i < ops.size() && i < 16; ++i) std::printf("%s %s %.3f s", i ? "," : "", ops[i].second.c_str(), ops[i].first);
  std::printf("\n");
}

// `batch` (B, T): its input_ids give the tokens per step.
inline void time_training_steps(mf::models::Model& model, const mf::models::Batch& batch, int64_t steps) {
  mf::optim::AdamW opt(mf::optim::default_param_groups(model, 0.1), 6e-4, 0.9, 0.95, 1e-8);
  const int64_t B = batch.input_ids.shape(0), T = batch.input_ids.shape(1);
  const double peak = mf::runtime::measured_peak_flops(), fpt = model.flops_per_token(T);
  std::printf("meshflow %s: %.1fM params; batch %lld x %lld; %d threads\n", model.describe().c_str(),
              static_cast<double>(model.num_parameters()) / 1e6, static_cast<long long>(B), static_cast<long long>(T),
              omp_get_max_threads());
  std::printf("FLOPs/token %.3g (Model::flops_per_token), peak %.1f GFLOP/s (measured FMA rate)\n", fpt, peak / 1e9);
  double best = 1e30, total = 0;
  for (int64_t s = 0; s < steps; ++s) {
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    const StepTimes t = train_step(model, batch, opt);
    const double dt = t.total_s;
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    std::printf("step %lld: loss %.4f, %.3f s (forward %.3f, backward %.3f, clip + AdamW %.3f; %ld page faults)\n",
                static_cast<long long>(s), t.loss.item(), dt, t.forward_s, t.backward_end_s - t.forward_s,
                dt - t.backward_end_s, ru1.ru_minflt - ru0.ru_minflt);
    if (s > 0) {
      best = std::min(best, dt);
      total += dt;
    }
  }
  const double tps = static_cast<double>(B * T) / (total / static_cast<double>(steps - 1));
  std::printf("meshflow: %.1f tokens/s (mean of steps 1..%lld), best step %.1f tokens/s, MFU %.1f%%, peak memory %.2f GB\n",
              tps, static_cast<long long>(steps - 1), static_cast<double>(B * T) / best, 100.0 * tps * fpt / peak,
              static_cast<double>(mf::allocator_for(mf::cpu_device()).stats().peak_bytes) / 1e9);
  if (std::getenv("MESHFLOW_BENCH_NO_BREAKDOWN") == nullptr) print_step_breakdown(model, batch, opt, peak);
}

// A causal language model: random ids and labels in [0, vocab).
inline void time_training_steps(mf::models::Model& model, int64_t vocab, int64_t B, int64_t T, int64_t steps) {
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(mf::philox_uniform(1, 0, i) * static_cast<double>(vocab));
    labels[i] = static_cast<int64_t>(mf::philox_uniform(1, 1, i) * static_cast<double>(vocab));
  }
  time_training_steps(model, mf::models::Batch(mf::from_vector(ids, {B, T}), mf::from_vector(labels, {B, T})), steps);
}

}  // namespace mfb
