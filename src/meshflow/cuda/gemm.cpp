// CUDA GEMM kernels through cuBLASLt (gemm_lt.h):
//   "gemm"          (kernels::Gemm)        f32, f64, bf16, f16
//   "gemm_bias_act" (kernels::GemmBiasAct) f32, bf16, f16: bias and GELU-tanh fused in the epilogue
#include "meshflow/cuda/gemm_lt.h"
#include "meshflow/cuda/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cuda {
namespace {

// Row-major C(M,N) = alpha * op(A) op(B) + beta * C.
template <DType D>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  LtGemm g;
  g.dtype = D;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.op = "gemm";
  lt_gemm(g);
}

// Row-major C(M,N) = act(op(A) op(B) + bias); pre_act (M,N) gets the value before act.
template <DType D>
void gemm_bias_act(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, const void* bias, int act, void* c, int64_t ldc, void* pre_act) {
  MF_CHECK(act == 0 || act == 1, "gemm_bias_act: act must be 0 (none) or 1 (gelu-tanh), got ", act);
  LtGemm g;
  g.dtype = D;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = 1.0;
  g.beta = 0.0;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.bias = bias;
  g.act = act == 1 ? GemmAct::kGeluTanh : GemmAct::kNone;
  g.pre_act = pre_act;
  g.op = "gemm_bias_act";
  lt_gemm(g);
}

}  // namespace

void register_gemm(KernelRegistry& r) {
  r.add<kernels::Gemm>("gemm", DeviceType::kCUDA, DType::kF32, gemm<DType::kF32>);
  r.add<kernels::Gemm>("gemm", DeviceType::kCUDA, DType::kF64, gemm<DType::kF64>);
  r.add<kernels::Gemm>("gemm", DeviceType::kCUDA, DType::kBF16, gemm<DType::kBF16>);
  r.add<kernels::Gemm>("gemm", DeviceType::kCUDA, DType::kF16, gemm<DType::kF16>);
  // Not f64: cuBLASLt's bias/GELU epilogues are documented for the f32-accumulating types.
  r.add<kernels::GemmBiasAct>("gemm_bias_act", DeviceType::kCUDA, DType::kF32, gemm_bias_act<DType::kF32>);
  r.add<kernels::GemmBiasAct>("gemm_bias_act", DeviceType::kCUDA, DType::kBF16, gemm_bias_act<DType::kBF16>);
  r.add<kernels::GemmBiasAct>("gemm_bias_act", DeviceType::kCUDA, DType::kF16, gemm_bias_act<DType::kF16>);
}

}  // namespace mf::cuda
