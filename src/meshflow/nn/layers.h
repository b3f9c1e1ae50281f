// Basic layers over the ops: Embedding, LayerNorm, Conv1D (Hugging Face GPT-2's (in, out)
// weight layout) and Linear ((out, in) layout). Each holds its parameters; init is the model's.
// Parameters of dtype bf16/f16 compute in f32 and round their outputs (nn/mixed_precision.h).
#pragma once
#include "meshflow/nn/mixed_precision.h"
#include "meshflow/nn/module.h"
#include "meshflow/ops/ops.h"

namespace mf::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, DType dt = DType::kF32) : weight(register_parameter("weight", zeros({num, dim}, dt))) {}
  Tensor forward(const Tensor& ids) const { return embedding(compute(weight), ids); }  // ids (...) -> (..., dim)
  Tensor weight;
};

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps, DType dt = DType::kF32)
      : weight(register_parameter("weight", ones({dim}, dt))), bias(register_parameter("bias", zeros({dim}, dt))),
        eps_(eps) {}
  Tensor forward(const Tensor& x) const {
    return round_to(layer_norm(x, compute(weight), compute(bias), eps_), weight.dtype());
  }
  Tensor weight, bias;

 private:
  double eps_;
};

// y = x W + b with W (in, out).
class Conv1D : public Module {
 public:
  Conv1D(int64_t in, int64_t out, DType dt = DType::kF32)
      : weight(register_parameter("weight", zeros({in, out}, dt))), bias(register_parameter("bias", zeros({out}, dt))) {}
  Tensor forward(const Tensor& x) const { return round_to(affine(x, compute(weight), compute(bias)), weight.dtype()); }
  Tensor weight, bias;
};

// y = x W^T + b with W (out, in).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool with_bias = true, DType dt = DType::kF32)
      : weight(register_parameter("weight", zeros({out, in}, dt))),
        bias(with_bias ? register_parameter("bias", zeros({out}, dt)) : Tensor()) {}
  Tensor forward(const Tensor& x) const { return round_to(linear(x, compute(weight), compute(bias)), weight.dtype()); }
  Tensor weight, bias;
};

}  // namespace mf::nn
