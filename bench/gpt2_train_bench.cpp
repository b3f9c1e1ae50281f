// GPT-2 training throughput: tokens/s and MFU of full training steps (forward, backward,
// clipping, AdamW) on synthetic tokens. MFU = tokens/s * (6 * params + 12 * layers * hidden *
// seq) / measured peak (every thread running AVX-512 FMAs). bench/gpt2_torch.py trains the same
// model and batch with PyTorch for comparison (scripts/bench_gpt2.sh runs both).
// Usage: meshflow_gpt2_train_bench [layers hidden heads seq micro_batch steps]
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/train/peak_flops.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::Gpt2Config c;
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  int64_t T = arg(4, 256), B = arg(5, 4), steps = arg(6, 6);
  c.max_seq_length = 1024;
  mf::models::Gpt2Model model(c);
  model.init_weights(1);
  mf::optim::AdamW opt(mf::optim::default_param_groups(model, 0.1), 6e-4, 0.9, 0.95, 1e-8);
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(mf::philox_uniform(1, 0, i) * c.vocab_size);
    labels[i] = static_cast<int64_t>(mf::philox_uniform(1, 1, i) * c.vocab_size);
  }
  mf::Tensor x = mf::from_vector(ids, {B, T}), y = mf::from_vector(labels, {B, T});
  double peak = mf::train::measured_peak_flops();
  double fpt = model.flops_per_token(T);
  std::printf("meshflow GPT-2: %lld layers, hidden %lld, heads %lld, %.1fM params; batch %lld x %lld; %d threads\n",
              static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.num_attention_heads), model.num_parameters() / 1e6, static_cast<long long>(B),
              static_cast<long long>(T), omp_get_max_threads());
  std::printf("FLOPs/token %.3g (6*params + 12*L*C*T), peak %.1f GFLOP/s (measured FMA rate)\n", fpt, peak / 1e9);
  double best = 1e30, total = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    opt.zero_grad();
    mf::Tensor loss = model.loss(x, y);
    double t_fwd = since();
    loss.backward();
    double t_bwd = since();
    mf::optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    double dt = since();
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    std::printf("step %lld: loss %.4f, %.3f s (forward %.3f, backward %.3f, clip + AdamW %.3f; %ld page faults)\n",
                static_cast<long long>(s), loss.item(), dt, t_fwd, t_bwd - t_fwd, dt - t_bwd, ru1.ru_minflt - ru0.ru_minflt);
    if (s > 0) {  // the first step pays for first-touch allocations
      best = std::min(best, dt);
      total += dt;
    }
  }
  double tps = static_cast<double>(B * T) / (total / static_cast<double>(steps - 1));
  std::printf("meshflow: %.1f tokens/s (mean of steps 1..%lld), best step %.1f tokens/s, MFU %.1f%%, peak memory %.2f GB\n",
              tps, static_cast<long long>(steps - 1), static_cast<double>(B * T) / best, 100.0 * tps * fpt / peak,
              mf::allocator_for(mf::cpu_device()).stats().peak_bytes / 1e9);
  return 0;
}
