// The timed training steps shared by the model benchmarks: full steps (forward, backward,
// clipping at 1.0, AdamW) of `model` on one synthetic batch, tokens/s (mean of the steps after
// the first, which pays for first-touch allocations) and MFU = tokens/s * flops_per_token /
// measured peak (every thread running AVX-512 FMAs).
#pragma once
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "meshflow/models/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/train/peak_flops.h"

namespace mfb {

// `batch` (B, T): its input_ids give the tokens per step.
inline void time_training_steps(mf::models::Model& model, const mf::models::Batch& batch, int64_t steps) {
  mf::optim::AdamW opt(mf::optim::default_param_groups(model, 0.1), 6e-4, 0.9, 0.95, 1e-8);
  const int64_t B = batch.input_ids.shape(0), T = batch.input_ids.shape(1);
  const double peak = mf::train::measured_peak_flops(), fpt = model.flops_per_token(T);
  std::printf("meshflow %s: %.1fM params; batch %lld x %lld; %d threads\n", model.describe().c_str(),
              static_cast<double>(model.num_parameters()) / 1e6, static_cast<long long>(B), static_cast<long long>(T),
              omp_get_max_threads());
  std::printf("FLOPs/token %.3g (Model::flops_per_token), peak %.1f GFLOP/s (measured FMA rate)\n", fpt, peak / 1e9);
  double best = 1e30, total = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    opt.zero_grad();
    mf::Tensor loss = model.loss(batch);
    const double t_fwd = since();
    loss.backward();
    const double t_bwd = since();
    mf::optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    const double dt = since();
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    std::printf("step %lld: loss %.4f, %.3f s (forward %.3f, backward %.3f, clip + AdamW %.3f; %ld page faults)\n",
                static_cast<long long>(s), loss.item(), dt, t_fwd, t_bwd - t_fwd, dt - t_bwd, ru1.ru_minflt - ru0.ru_minflt);
    if (s > 0) {
      best = std::min(best, dt);
      total += dt;
    }
  }
  const double tps = static_cast<double>(B * T) / (total / static_cast<double>(steps - 1));
  std::printf("meshflow: %.1f tokens/s (mean of steps 1..%lld), best step %.1f tokens/s, MFU %.1f%%, peak memory %.2f GB\n",
              tps, static_cast<long long>(steps - 1), static_cast<double>(B * T) / best, 100.0 * tps * fpt / peak,
              static_cast<double>(mf::allocator_for(mf::cpu_device()).stats().peak_bytes) / 1e9);
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
