// Mixed precision in the layers: a model whose parameters are stored in bf16/f16 ("storage").
// Two regimes, chosen per (device, storage dtype) by mf::native_half (ops/native_half.cpp):
//
// Native (CUDA, where every kernel the model calls exists for bf16/f16): weights are used as
// they are stored (no f32 copy), and activations stay in the storage dtype — every op reads and
// writes bf16/f16 and computes in f32 inside its kernel (a GEMM accumulates in f32 and rounds C
// once; LayerNorm's statistics, attention's softmax and the cross-entropy are f32). The residual
// stream and the logits are bf16/f16; the cross-entropy returns an f32 loss. Gradients of
// activations and parameters are bf16/f16.
//
// Simulated (the CPU, which has kernels for f32/f64 only): the same arithmetic in f32 —
//  - each forward casts its half-precision weights to f32 with the differentiable cast (exact),
//    so the weight's f32 gradient flows back through the cast and is rounded once into the
//    parameter's bf16/f16 .grad;
//  - every activation that leaves a layer (linear/Conv1D outputs, LayerNorm outputs, the
//    embedding sum, the attention output, the MLP activation, the residual stream, the logits)
//    is rounded through the storage type (cast there and back); its gradient is rounded the
//    same way in backward. Inside an op — a GEMM's accumulation, LayerNorm's statistics, the
//    softmax and attention scores, the cross-entropy — everything stays f32.
// A bf16 GEMM on the GPU is the f32 GEMM of the rounded inputs, rounded once: what the
// simulation computes, up to the order of the f32 accumulation.
//
// With f32/f64 parameters both helpers return their argument: no op is added. The optimizer's
// f32 master weights (optim/optimizer.h) are the same in both regimes.
#pragma once
#include "meshflow/ops/ops.h"

namespace mf::nn {

// The parameter as the layer computes with it: itself when undefined, not bf16/f16, or bf16/f16
// on a device with native half kernels; else its f32 cast (differentiable).
inline Tensor compute(const Tensor& param) {
  if (!param.defined() || !is_half(param.dtype()) || native_half(param.device(), param.dtype())) return param;
  return cast(param, compute_dtype(param.dtype()));
}

// An activation leaving a layer, in a model stored in `storage`: x itself unless storage is
// bf16/f16. Native: x cast to storage (x itself when already there). Simulated: x (f32) rounded
// as if stored in `storage` (cast there and back), its dtype kept.
inline Tensor round_to(const Tensor& x, DType storage) {
  if (!is_half(storage)) return x;
  if (native_half(x.device(), storage)) return cast(x, storage);
  return cast(cast(x, storage), x.dtype());
}

}  // namespace mf::nn
