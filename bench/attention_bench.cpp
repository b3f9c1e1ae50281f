// Fused attention speed against the machine's sgemm: causal and non-causal forward, backward
// and forward+backward GFLOP/s at B=4, H=12, D=64 and T=1024 (or as given; f32; q/k/v are strided views of
// (B, T, H, D) storage), dnnl_sgemm GFLOP/s on a 1024x2304x768 GEMM, their ratio, and the
// allocator's peak bytes over one forward+backward. FLOPs: forward 4 B H T^2 D, backward
// 8 B H T^2 D (the recompute of P is not credited), both halved when causal. Op-level times
// include allocating (and page-faulting) out and dq/dk/dv; "kernels only" reuses buffers.
// Dropout on the probabilities (p as given, 0 by default) is drawn in the forward and again in
// the backward, as in training.
// Run: OMP_NUM_THREADS=2 ./build/bench/meshflow_attention_bench [rounds] [T] [dropout_p]
//   GPT-2 small's training step: ./build/bench/meshflow_attention_bench 5 256 0.1
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/ops.h"
#include "meshflow/ops/registry.h"
#include "meshflow/tensor/allocator.h"

namespace {

int64_t g_seq = 1024;        // T
double g_dropout_p = 0.0;  // on the attention probabilities

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double sgemm_gflops(int reps) {
  const int64_t M = 1024, N = 2304, K = 768;
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N, 0.0f);
  double best = 1e30;
  for (int r = 0; r < reps + 2; ++r) {
    double t0 = now();
    dnnl_sgemm('N', 'N', M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
    double t = now() - t0;
    if (r >= 2) best = std::min(best, t);
  }
  return 2.0 * M * N * K / best * 1e-9;
}

struct Timing {
  double fwd = 1e30, bwd = 1e30, total = 1e30;
  int64_t peak = 0;
  double kfwd = 1e30, kbwd = 1e30;  // the kernels alone, outputs preallocated (no page faults)
};

Timing time_attention(bool causal, int reps) {
  const int64_t B = 4, H = 12, T = g_seq, D = 64;
  mf::Generator g(1);
  auto leaf = [&] {
    mf::Tensor t = mf::empty({B, T, H, D});
    mf::normal_(t, 0.0, 1.0, &g);
    t.set_requires_grad(true);
    return t;
  };
  mf::Tensor lq = leaf(), lk = leaf(), lv = leaf();
  mf::Tensor dout = mf::empty({B, H, T, D});
  mf::normal_(dout, 0.0, 1.0, &g);
  mf::AttentionOptions opts;
  opts.causal = causal;
  opts.dropout_p = g_dropout_p;
  opts.gen = &g;
  Timing tm;
  mf::Allocator& alloc = mf::allocator_for(mf::cpu_device());
  for (int r = 0; r < reps + 1; ++r) {
    for (mf::Tensor* t : {&lq, &lk, &lv}) t->zero_grad();
    alloc.reset_peak();
    const int64_t base = alloc.stats().current_bytes;
    double t0 = now();
    mf::Tensor out = mf::scaled_dot_product_attention(mf::transpose(lq, 1, 2), mf::transpose(lk, 1, 2),
                                                      mf::transpose(lv, 1, 2), opts);
    double t1 = now();
    out.backward(dout);
    double t2 = now();
    if (r == 0) continue;  // warm-up
    tm.fwd = std::min(tm.fwd, t1 - t0);
    tm.bwd = std::min(tm.bwd, t2 - t1);
    tm.total = std::min(tm.total, t2 - t0);
    tm.peak = std::max(tm.peak, alloc.stats().peak_bytes - base);
  }
  // kernels alone on the same strided inputs, into outputs allocated (and touched) once
  mf::NoGradGuard ng;
  mf::Tensor q = mf::transpose(lq.detach(), 1, 2), k = mf::transpose(lk.detach(), 1, 2);
  mf::Tensor v = mf::transpose(lv.detach(), 1, 2);
  mf::Tensor out = mf::zeros({B, H, T, D}), lse = mf::zeros({B, H, T});
  mf::Tensor dq = mf::zeros({B, H, T, D}), dk = mf::zeros({B, H, T, D}), dv = mf::zeros({B, H, T, D});
  mf::kernels::AttentionParams p;
  p.causal = causal;
  p.scale = 0.125;
  p.dropout_p = g_dropout_p;
  p.seed = 1;
  auto* fwd = mf::kernel<mf::kernels::AttentionForward>("attention_forward", mf::cpu_device(), mf::DType::kF32);
  auto* bwd = mf::kernel<mf::kernels::AttentionBackward>("attention_backward", mf::cpu_device(), mf::DType::kF32);
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = now();
    fwd(q, k, v, mf::Tensor(), p, out, lse);
    double t1 = now();
    bwd(dout, q, k, v, out, lse, mf::Tensor(), p, dq, dk, dv);
    double t2 = now();
    if (r == 0) continue;
    tm.kfwd = std::min(tm.kfwd, t1 - t0);
    tm.kbwd = std::min(tm.kbwd, t2 - t1);
  }
  return tm;
}

}  // namespace

void merge(Timing& best, const Timing& t) {
  best.fwd = std::min(best.fwd, t.fwd);
  best.bwd = std::min(best.bwd, t.bwd);
  best.total = std::min(best.total, t.total);
  best.kfwd = std::min(best.kfwd, t.kfwd);
  best.kbwd = std::min(best.kbwd, t.kbwd);
  best.peak = std::max(best.peak, t.peak);
}

int main(int argc, char** argv) {
  // Rounds interleave sgemm and attention so that both see the same machine load (the cores
  // may be shared); every figure is the best over all rounds.
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  if (argc > 2) g_seq = std::atoll(argv[2]);
  if (argc > 3) g_dropout_p = std::atof(argv[3]);
  const double B = 4, H = 12, T = static_cast<double>(g_seq), D = 64;
  std::printf("threads %d, B=4 H=12 T=%lld D=64 f32, dropout %g, best of %d rounds x 2 reps\n", omp_get_max_threads(),
              static_cast<long long>(g_seq), g_dropout_p, rounds);
  double sg = 0;
  Timing best[2];
  for (int r = 0; r < rounds; ++r) {
    sg = std::max(sg, sgemm_gflops(4));
    merge(best[0], time_attention(true, 2));
    merge(best[1], time_attention(false, 2));
  }
  double causal_total = 0;
  for (bool causal : {true, false}) {
    const Timing& tm = best[causal ? 0 : 1];
    const double f = causal ? 0.5 : 1.0;
    const double ffwd = 4 * B * H * T * T * D * f, fbwd = 8 * B * H * T * T * D * f;
    const double total = (ffwd + fbwd) / tm.total * 1e-9;
    if (causal) causal_total = total;
    std::printf("%-10s fwd %.1f GFLOP/s (%.1f ms), bwd %.1f GFLOP/s (%.1f ms), fwd+bwd %.1f GFLOP/s (%.1f ms)\n",
                causal ? "causal" : "non-causal", ffwd / tm.fwd * 1e-9, tm.fwd * 1e3, fbwd / tm.bwd * 1e-9,
                tm.bwd * 1e3, total, tm.total * 1e3);
    std::printf("%-10s kernels only: fwd %.1f GFLOP/s, bwd %.1f GFLOP/s, fwd+bwd %.1f GFLOP/s\n", "",
                ffwd / tm.kfwd * 1e-9, fbwd / tm.kbwd * 1e-9, (ffwd + fbwd) / (tm.kfwd + tm.kbwd) * 1e-9);
    std::printf("%-10s peak allocator bytes over fwd+bwd (above inputs): %.1f MiB (one T x T f32 score matrix per "
                "head would be %.1f MiB)\n",
                "", tm.peak / 1048576.0, B * H * T * T * 4 / 1048576.0);
  }
  std::printf("sgemm 1024x2304x768: %.1f GFLOP/s\n", sg);
  std::printf("ratio causal fwd+bwd (op level) / sgemm: %.2f (target >= 0.40)\n", causal_total / sg);
  return 0;
}
