// CPU GEMM: oneDNN's sgemm for f32 (chosen over OpenBLAS 0.3.21, which needs
// OPENBLAS_CORETYPE=SkylakeX to use AVX-512 on this CPU; see docs/architecture.md), OpenBLAS
// dgemm for f64. Both run on the GCC OpenMP runtime, as do our own kernels.
#include <cblas.h>
#include <dnnl.h>

#include <string>

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

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda, const void* b,
           int64_t ldb, double beta, void* c, int64_t ldc) {
  if (trivial_gemm(m, n, k, beta, static_cast<float*>(c), ldc)) return;
  // Recorded (profiling, the benchmarks' step breakdown) with its multiply-add FLOPs.
  const trace::Scope span = trace::enabled() ? trace::Scope("kernel", "sgemm", "\"flops\":" + std::to_string(2 * m * n * k) +
                                                                                  ",\"shape\":\"" + (ta ? "T" : "N") + (tb ? "T " : "N ") +
                                                                                  std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "\"")
                                             : trace::Scope();
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
