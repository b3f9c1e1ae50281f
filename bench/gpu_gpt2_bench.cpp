// GPT-2 training throughput on one GPU: tokens/s, MFU and peak memory of full training steps
// (forward, backward, clipping, AdamW with f32 master weights) on synthetic tokens, with
// parameters and activations in bf16 (or f32/f16) and the fused CUDA kernels (cuBLASLt GEMMs,
// flash attention, fused norm / cross-entropy / AdamW). Dropout is 0, as in the PyTorch run it is
// compared with (bench/gpt2_torch_gpu.py; bench/gpu_gpt2_bench.sh runs both).
// MFU = tokens/s * (6 * params + 12 * layers * hidden * seq) / the chip's dense peak for the
// dtype (cuda::peak_flops, the trainer's table: H100/H200 SXM 989.4 TFLOP/s bf16/f16, 67 f32;
// A100 312 / 19.5), or MESHFLOW_PEAK_TFLOPS when set.
// Usage: meshflow_gpu_gpt2_bench [layers hidden heads seq micro_batch steps dtype]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "meshflow/cuda/device_info.h"
#include "meshflow/models/gpt2/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"

int main(int argc, char** argv) {
  auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
  mf::models::Gpt2Config c;
  c.num_layers = arg(1, 12);
  c.hidden_size = arg(2, 768);
  c.num_attention_heads = arg(3, 12);
  int64_t T = arg(4, 1024), B = arg(5, 16), steps = arg(6, 20);
  c.dtype = mf::dtype_from_name(argc > 7 ? argv[7] : "bf16");
  c.max_seq_length = std::max<int64_t>(1024, T);
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  if (mf::cuda_device_count() == 0) {
    std::fprintf(stderr, "meshflow_gpu_gpt2_bench: no CUDA device visible\n");
    return 2;
  }
  const std::string gpu_name = mf::cuda::device_info(0).name;
  const mf::Device gpu = mf::cuda_device(0);
  try {
    mf::models::Gpt2Model model(c);
    model.init_weights(1);
    model.to_device(gpu);
    mf::optim::AdamW opt(mf::optim::default_param_groups(model, 0.1), 6e-4, 0.9, 0.95, 1e-8);
    std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int64_t>(mf::philox_uniform(1, 0, i) * c.vocab_size);
      labels[i] = static_cast<int64_t>(mf::philox_uniform(1, 1, i) * c.vocab_size);
    }
    mf::Tensor x = mf::from_vector(ids, {B, T}), y = mf::from_vector(labels, {B, T});
    const char* peak_env = std::getenv("MESHFLOW_PEAK_TFLOPS");
    double peak = peak_env ? std::atof(peak_env) * 1e12 : mf::cuda::peak_flops(0, c.dtype);
    double fpt = model.flops_per_token(T);
    std::printf("meshflow GPT-2 on %s: %lld layers, hidden %lld, heads %lld, %.1fM params, %s; batch %lld x %lld\n",
                gpu_name.c_str(), static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_attention_heads), model.num_parameters() / 1e6, mf::dtype_name(c.dtype),
                static_cast<long long>(B), static_cast<long long>(T));
    std::printf("FLOPs/token %.4g (6*params + 12*L*C*T), peak %.1f TFLOP/s (dense %s)\n", fpt, peak / 1e12,
                mf::dtype_name(c.dtype));
    auto& alloc = mf::allocator_for(gpu);
    const int64_t warmup = 3;
    double total = 0;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      mf::Tensor loss = model.loss(x, y);  // host ids and labels, as the trainer passes them
      loss.backward();
      mf::optim::clip_grad_norm(model.parameters(), 1.0);
      opt.step();
      double l = loss.item();  // waits for the step's kernels (same stream)
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s >= warmup) total += dt;
      if (s < warmup || s == warmup + steps - 1 || s % 5 == 0)
        std::printf("step %lld: loss %.4f, %.1f ms\n", static_cast<long long>(s), l, dt * 1e3);
    }
    double tps = static_cast<double>(B * T) * static_cast<double>(steps) / total;
    auto st = alloc.stats();
    std::printf("RESULT meshflow: %.0f tokens/s, MFU %.1f%%, peak memory %.2f GB (reserved %.2f GB), %lld steps\n", tps,
                peak > 0 ? 100.0 * tps * fpt / peak : 0.0, st.peak_bytes / 1e9, st.reserved_bytes / 1e9,
                static_cast<long long>(steps));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshflow_gpu_gpt2_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
