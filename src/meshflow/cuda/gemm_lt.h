// One row-major GEMM through cuBLASLt, with an optional fused epilogue (bias, GELU-tanh, the
// pre-activation as an auxiliary output). Used by the "gemm" and "gemm_bias_act" kernels
// (cuda/gemm.cpp). Runs on cuda::compute_stream() of the current device.
//
// Row-major C(M,N) = alpha * op(A) op(B) + beta * C is, read column-major, C^T(N,M) =
// op(B)^T op(A)^T: the call swaps the operands, so a bias over C's N columns is cuBLASLt's
// bias over the rows of its D.
#pragma once
#include <cstdint>

#include "meshflow/core/dtype.h"

namespace mf::cuda {

enum class GemmAct : int { kNone = 0, kGeluTanh = 1 };

struct LtGemm {
  DType dtype = DType::kF32;  // of A, B, C, bias and pre_act: f32, f64, bf16, f16
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;  // row-major, (M,K) or (K,M) when trans_a
  int64_t lda = 0;
  const void* b = nullptr;  // row-major, (K,N) or (N,K) when trans_b
  int64_t ldb = 0;
  void* c = nullptr;        // row-major (M,N)
  int64_t ldc = 0;
  const void* bias = nullptr;  // (N) contiguous, or null
  GemmAct act = GemmAct::kNone;
  void* pre_act = nullptr;     // (M,N) contiguous (ld N): C before the activation; only with kGeluTanh
  const char* op = "gemm";     // names the caller in errors
};

// Throws mf::Error with the shapes on bad arguments or a cuBLASLt failure.
void lt_gemm(const LtGemm& g);

}  // namespace mf::cuda
