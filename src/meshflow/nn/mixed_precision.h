// Mixed precision in the layers. A model whose parameters are stored in bf16/f16 computes in f32
// (CPU kernels exist for f32/f64 only) while storage and rounding behave as the 16-bit type:
//
//  - each forward casts its half-precision weights to f32 with the differentiable cast (exact),
//    so the weight's f32 gradient flows back through the cast and is rounded once into the
//    parameter's bf16/f16 .grad;
//  - every activation that leaves a layer (linear/Conv1D outputs, LayerNorm outputs, the
//    embedding sum, the attention output, the MLP activation, the residual stream, the logits)
//    is rounded through the storage type (cast there and back); its gradient is rounded the
//    same way in backward. Inside an op — a GEMM's accumulation, LayerNorm's statistics, the
//    softmax and attention scores, the cross-entropy — everything stays f32.
//
// With f32/f64 parameters both helpers return their argument: no op is added.
#pragma once
#include "meshflow/ops/ops.h"

namespace mf::nn {

// The parameter in its compute dtype (f32 for bf16/f16; itself otherwise, or when undefined).
inline Tensor compute(const Tensor& param) {
  return param.defined() && is_half(param.dtype()) ? cast(param, compute_dtype(param.dtype())) : param;
}

// x (a compute-dtype activation) rounded as if stored in `storage`; x itself unless storage is
// bf16/f16.
inline Tensor round_to(const Tensor& x, DType storage) {
  return is_half(storage) ? cast(cast(x, storage), x.dtype()) : x;
}

}  // namespace mf::nn
