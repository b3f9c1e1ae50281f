// CPU GEMM: oneDNN's sgemm for f32 (chosen over OpenBLAS 0.3.21, which needs
// OPENBLAS_CORETYPE=SkylakeX to use AVX-512 on this CPU; see docs/architecture/engine.md) — and
// oneDNN's matmul primitive for the shapes its brgemm kernels run faster (below); OpenBLAS dgemm
// for f64. All run on the GCC OpenMP runtime, as do our own kernels.
#include <cblas.h>
#include <dnnl.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "meshflow/core/trace.h"

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

// C(M,N) row-major, K == 0 leaves beta * C.
template <class T>
bool trivial_gemm(int64_t m, int64_t n, int64_t k, double beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0 ? T(0) : static_cast<T>(beta) * c[i * ldc + j];
  return true;
}

// C(M,N) = A(M,K) · op(B) (+ C when beta is 1), B stored (N,K) or (K,N), through oneDNN's matmul
// primitive where its
// brgemm kernels beat dnnl_sgemm on AVX-512 — measured on GPT-2 small's shapes, 2 threads, best of
// 10 (GFLOP/s, primitive vs sgemm): a long inner dimension (1024x768x3072: 358 vs 291) and a
// vocabulary-wide output (the logits, 256x50257x768: 342 vs 316); not between (1024x3072x768: 342
// vs 363; 1024x768x768: 347 vs 348), nor for the other forms, where sgemm is faster. A
// vocabulary-wide output with a short inner dimension goes to sgemm too: the tiny GPT-2's logits
// (256x50257x128, standalone, best of 5: sgemm 291 vs 252; in its training step the primitive ran
// at 194); the two cross near K = 512 (256x50257xK: K 384: 320 vs 308, K 512: 292 vs 321). And
// x·W (B as stored) with a vocabulary-long inner dimension and a narrow output — the gradient of
// a narrow model's hidden state through the logits, 256x128x50257 — runs faster through the
// primitive too (standalone, best of 7: N 64: 386 vs 340, N 128: 346 vs 312; from N 256 on sgemm
// wins: 315 vs 361). The choice depends on the shape alone, so a run's results do not depend on
// timing. A primitive per shape and strides, made once; each call brings its own scratchpad, so
// calls from several threads do not share one.
constexpr int64_t kMatmulMinK = 2048, kMatmulMinN = 16384, kMatmulWideMinK = 512;
constexpr int64_t kMatmulLongK = 16384, kMatmulNarrowMaxN = 128;
class MatmulPrimitive {
 public:
  static MatmulPrimitive& instance() {
    static MatmulPrimitive m;
    return m;
  }
  void run(bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
           bool accumulate, float* c, int64_t ldc) {
    const Entry& e = entry({m, n, k, lda, ldb, ldc, accumulate ? 1 : 0, tb ? 1 : 0});
    thread_local std::vector<char> scratch;
    if (scratch.size() < e.scratch.get_size()) scratch.resize(e.scratch.get_size());
    dnnl::stream stream(engine_);
    e.primitive.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(e.a, engine_, const_cast<float*>(a))},
                                 {DNNL_ARG_WEIGHTS, dnnl::memory(e.b, engine_, const_cast<float*>(b))},
                                 {DNNL_ARG_DST, dnnl::memory(e.c, engine_, c)},
                                 {DNNL_ARG_SCRATCHPAD, dnnl::memory(e.scratch, engine_, scratch.data())}});
    stream.wait();
  }

 private:
  using Key = std::array<int64_t, 8>;  // m, n, k, lda, ldb, ldc, accumulate, tb
  struct Entry {
    dnnl::memory::desc a, b, c, scratch;
    dnnl::matmul primitive;
  };
  const Entry& entry(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
    if (cache_.size() >= 512) cache_.clear();  // shapes of a model are few; a sweep of many starts over
    const auto [m, n, k, lda, ldb, ldc, accumulate, tb] = key;
    using dt = dnnl::memory::data_type;
    auto e = std::make_unique<Entry>();
    e->a = dnnl::memory::desc({m, k}, dt::f32, dnnl::memory::dims{lda, 1});
    e->b = dnnl::memory::desc({k, n}, dt::f32, tb ? dnnl::memory::dims{1, ldb}   // stored (N, K)
                                                   : dnnl::memory::dims{ldb, 1});  // stored (K, N)
    e->c = dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a, e->b, e->c), attr, engine_);
    e->scratch = pd.scratchpad_desc();
    e->primitive = dnnl::matmul(pd);
    return *cache_.emplace(key, std::move(e)).first->second;
  }
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  std::mutex mu_;
  std::map<Key, std::unique_ptr<Entry>> cache_;
};

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda, const void* b,
           int64_t ldb, double beta, void* c, int64_t ldc) {
  if (trivial_gemm(m, n, k, beta, static_cast<float*>(c), ldc)) return;
  // Recorded (profiling, the benchmarks' step breakdown) with its multiply-add FLOPs.
  const trace::Scope span = trace::enabled() ? trace::Scope("kernel", "sgemm", "\"flops\":" + std::to_string(2 * m * n * k) +
                                                                                  ",\"shape\":\"" + (ta ? "T" : "N") + (tb ? "T " : "N ") +
                                                                                  std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "\"")
                                             : trace::Scope();
  const bool primitive = tb ? k >= kMatmulMinK || (n >= kMatmulMinN && k >= kMatmulWideMinK)
                            : k >= kMatmulLongK && n <= kMatmulNarrowMaxN;
  if (!ta && primitive && alpha == 1.0 && (beta == 0.0 || beta == 1.0)) {
    try {
      MatmulPrimitive::instance().run(tb, m, n, k, static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb,
                                      beta == 1.0, static_cast<float*>(c), ldc);
    } catch (const dnnl::error& e) {
      MF_THROW("oneDNN matmul failed: ", e.what(), " (M=", m, " N=", n, " K=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
    }
    return;
  }
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, static_cast<float>(alpha),
                                static_cast<const float*>(a), lda, static_cast<const float*>(b), ldb,
                                static_cast<float>(beta), static_cast<float*>(c), ldc);
  MF_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st), " (M=", m, " N=", n, " K=", k,
           " lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
}

void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda, const void* b,
           int64_t ldb, double beta, void* c, int64_t ldc) {
  if (trivial_gemm(m, n, k, beta, static_cast<double*>(c), ldc)) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, static_cast<const double*>(a), static_cast<int>(lda),
              static_cast<const double*>(b), static_cast<int>(ldb), beta, static_cast<double*>(c),
              static_cast<int>(ldc));
}

}  // namespace

void register_gemm(KernelRegistry& r) {
  r.add<kernels::Gemm>("gemm", DeviceType::kCPU, DType::kF32, sgemm);
  r.add<kernels::Gemm>("gemm", DeviceType::kCPU, DType::kF64, dgemm);
}

}  // namespace mf::cpu
