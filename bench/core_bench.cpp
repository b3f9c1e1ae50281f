// Core kernel benchmark: GEMM rates of linear/matmul on the GPT-2 small shapes next to the
// BLAS's own sgemm on the same shapes, and bandwidth of elementwise/norm/softmax kernels next
// to a plain memory copy. Run with OMP_NUM_THREADS=2. Best of several repetitions.
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"

extern "C" char* openblas_get_corename();

namespace {

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best time of each function over `reps` rounds, the functions interleaved within a round so
// that a noisy neighbour slows all of them alike.
std::vector<double> best_interleaved(const std::vector<std::function<void()>>& fs, int reps) {
  std::vector<double> best(fs.size(), 1e30);
  for (const auto& f : fs) f();  // warm up (first touch, allocator cache)
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fs.size(); ++i) best[i] = std::min(best[i], seconds(fs[i]));
  return best;
}

mf::Tensor rnd(const mf::Shape& s, uint64_t seed) {
  mf::Generator g(seed);
  mf::Tensor t = mf::empty(s, mf::DType::kF32);
  mf::normal_(t, 0.0, 1.0, &g);
  return t;
}

struct GemmCase {
  const char* what;
  char ta, tb;
  int64_t m, n, k;
};

// About a second of GEMMs before any measurement, so that the first case does not pay for the
// process's warm-up (clock ramp, first-touch of oneDNN's buffers).
void warm_up() {
  mf::Tensor a = rnd({1024, 768}, 11), b = rnd({2304, 768}, 12);
  mf::NoGradGuard ng;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0) mf::linear(a, b);
}

void bench_gemm() {
  warm_up();
  std::printf("\n== GEMM, GPT-2 small (B*T = 1024), f32, GFLOP/s (best of 8, interleaved with the BLAS calls) ==\n");
  std::printf("%-34s %10s %10s %10s %8s\n", "op (M x N x K)", "meshflow", "dnnl_sgemm", "openblas", "ours/BLAS");
  const int64_t BT = 1024;
  struct Lin {
    int64_t in, out;
  } lins[] = {{768, 2304}, {768, 3072}, {3072, 768}, {768, 50257}};
  double worst = 1e9;
  for (auto l : lins) {
    mf::Tensor x = rnd({BT, l.in}, 1), w = rnd({l.out, l.in}, 2), b = rnd({l.out}, 3);
    mf::Tensor dy = rnd({BT, l.out}, 4);
    std::vector<float> c(static_cast<size_t>(std::max({BT * l.out, BT * l.in, l.out * l.in})));
    int reps = l.out > 10000 ? 4 : 8;
    struct Row {
      const char* name;
      char ta, tb;
      int64_t m, n, k;
      std::function<void()> ours;
      const float *a, *b;
      int64_t lda, ldb;
    };
    mf::NoGradGuard ng;
    std::vector<Row> rows = {
        {"linear fwd  x W^T", 'N', 'T', BT, l.out, l.in, [&] { mf::linear(x, w); }, x.data<float>(), w.data<float>(), l.in, l.in},
        {"linear fwd +bias", 'N', 'T', BT, l.out, l.in, [&] { mf::linear(x, w, b); }, x.data<float>(), w.data<float>(), l.in, l.in},
        {"bwd dx = dy W", 'N', 'N', BT, l.in, l.out, [&] { mf::matmul(dy, w); }, dy.data<float>(), w.data<float>(), l.out, l.in},
        {"bwd dW = dy^T x", 'T', 'N', l.out, l.in, BT, [&] { mf::matmul(mf::transpose(dy, 0, 1), x); }, dy.data<float>(),
         x.data<float>(), l.out, l.in},
    };
    for (auto& r : rows) {
      double flops = 2.0 * r.m * r.n * r.k;
      std::vector<double> t = best_interleaved(
          {r.ours,
           [&] { dnnl_sgemm(r.ta, r.tb, r.m, r.n, r.k, 1.f, r.a, r.lda, r.b, r.ldb, 0.f, c.data(), r.n); },
           [&] {
             cblas_sgemm(CblasRowMajor, r.ta == 'T' ? CblasTrans : CblasNoTrans, r.tb == 'T' ? CblasTrans : CblasNoTrans,
                         static_cast<int>(r.m), static_cast<int>(r.n), static_cast<int>(r.k), 1.f, r.a,
                         static_cast<int>(r.lda), r.b, static_cast<int>(r.ldb), 0.f, c.data(), static_cast<int>(r.n));
           }},
          reps);
      double t_ours = t[0], t_dnnl = t[1], t_ob = t[2];
      char label[64];
      std::snprintf(label, sizeof label, "%s %ldx%ldx%ld", r.name, static_cast<long>(r.m), static_cast<long>(r.n),
                    static_cast<long>(r.k));
      double ratio = t_dnnl / t_ours;
      worst = std::min(worst, ratio);
      std::printf("%-34s %10.1f %10.1f %10.1f %7.0f%%\n", label, flops / t_ours / 1e9, flops / t_dnnl / 1e9,
                  flops / t_ob / 1e9, 100 * ratio);
    }
  }
  std::printf("lowest meshflow / dnnl_sgemm ratio: %.0f%% (target >= 90%%)\n", 100 * worst);
  std::printf("OpenBLAS core in use: %s (OPENBLAS_CORETYPE=%s)\n", openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset");
}

void bench_bandwidth() {
  std::printf("\n== Memory-bound kernels, f32, GB/s (bytes read + written, best of 10, interleaved with the copy) ==\n");
  std::printf("%-40s %10s %10s %8s\n", "kernel", "GB/s", "copy GB/s", "vs copy");
  mf::NoGradGuard ng;
  auto parallel_copy = [](char* dst, const char* src, int64_t nbytes) {
#pragma omp parallel
    {
      int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
      int64_t chunk = (nbytes + nt - 1) / nt, lo = id * chunk, hi = std::min(nbytes, lo + chunk);
      if (lo < hi) std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo));
    }
  };
  struct Case {
    const char* name;
    mf::Shape shape;
    int arrays;  // arrays of the tensor's size read + written
    std::function<void(const mf::Tensor&, const mf::Tensor&)> run;
  };
  mf::Tensor w768 = rnd({768}, 7), b768 = rnd({768}, 8);
  std::vector<Case> cases = {
      {"add (8192, 768)", {8192, 768}, 3, [](const mf::Tensor& x, const mf::Tensor& y) { mf::add(x, y); }},
      {"gelu tanh (4096, 3072)", {4096, 3072}, 2, [](const mf::Tensor& x, const mf::Tensor&) { mf::gelu(x); }},
      {"gelu backward (4096, 3072)", {4096, 3072}, 3, [](const mf::Tensor& x, const mf::Tensor& y) { mf::gelu_backward(y, x, true); }},
      {"dropout p=0.1 (1024, 768)", {1024, 768}, 2, [](const mf::Tensor& x, const mf::Tensor&) { mf::dropout(x, 0.1); }},
      {"dropout p=0.1 (4096, 3072)", {4096, 3072}, 2, [](const mf::Tensor& x, const mf::Tensor&) { mf::dropout(x, 0.1); }},
      {"layer_norm (8192, 768)", {8192, 768}, 2, [&](const mf::Tensor& x, const mf::Tensor&) { mf::layer_norm(x, w768, b768); }},
      {"softmax (8192, 1024)", {8192, 1024}, 2, [](const mf::Tensor& x, const mf::Tensor&) { mf::softmax(x); }},
      {"softmax (1024, 50257)", {1024, 50257}, 2, [](const mf::Tensor& x, const mf::Tensor&) { mf::softmax(x); }},
  };
  double worst = 1e9;
  for (auto& c : cases) {
    mf::Tensor x = rnd(c.shape, 1), y = rnd(c.shape, 2);
    double bytes = static_cast<double>(c.arrays) * x.nbytes();
    int64_t nb = static_cast<int64_t>(x.nbytes());
    std::vector<char> src(static_cast<size_t>(nb), 1), dst(static_cast<size_t>(nb), 0);
    std::vector<double> t = best_interleaved({[&] { c.run(x, y); }, [&] { parallel_copy(dst.data(), src.data(), nb); }}, 10);
    double rate = bytes / t[0] / 1e9, copy = 2.0 * nb / t[1] / 1e9;
    worst = std::min(worst, rate / copy);
    std::printf("%-40s %10.1f %10.1f %7.0f%%\n", c.name, rate, copy, 100 * rate / copy);
  }
  std::printf("lowest kernel / copy ratio: %.0f%% (target >= 60%%)\n", 100 * worst);
}

}  // namespace

int main() {
  std::printf("meshflow core benchmark: %d OpenMP threads (OMP_NUM_THREADS)\n", omp_get_max_threads());
  bench_gemm();
  bench_bandwidth();
  return 0;
}
