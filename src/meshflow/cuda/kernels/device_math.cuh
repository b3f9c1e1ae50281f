// Device math in the accumulation type (f32 or f64 overloads of the CUDA math library, never
// the fast intrinsics), and the activation formulas of the CPU kernels (ops/cpu/elementwise.cpp):
// gelu (tanh form) = x * sigmoid(2u), gelu (erf form), silu, relu, and their derivatives.
#pragma once
#include <cuda_runtime.h>

namespace mf::cuda {

__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__device__ __forceinline__ float dev_log(float x) { return logf(x); }
__device__ __forceinline__ double dev_log(double x) { return log(x); }
__device__ __forceinline__ float dev_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dev_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float dev_erf(float x) { return erff(x); }
__device__ __forceinline__ double dev_erf(double x) { return erf(x); }

inline constexpr double kSqrt2OverPi = 0.7978845608028654;
inline constexpr double kGeluCoef = 0.044715;
inline constexpr double kInvSqrt2 = 0.7071067811865476;
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <class A>
__device__ __forceinline__ A dev_sigmoid(A x) {
  return A(1) / (A(1) + dev_exp(-x));
}
template <class A>
__device__ __forceinline__ A gelu_tanh_fwd(A x) {
  A u = A(kSqrt2OverPi) * (x + A(kGeluCoef) * x * x * x);
  return x * dev_sigmoid(A(2) * u);
}
template <class A>
__device__ __forceinline__ A gelu_erf_fwd(A x) {
  return A(0.5) * x * (A(1) + dev_erf(x * A(kInvSqrt2)));
}
// d/dx of the activations (dx = dy * derivative).
template <class A>
__device__ __forceinline__ A gelu_tanh_grad(A x) {
  A u = A(kSqrt2OverPi) * (x + A(kGeluCoef) * x * x * x);
  A s = dev_sigmoid(A(2) * u);
  A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluCoef) * x * x);
  return s + A(2) * x * s * (A(1) - s) * du;
}
template <class A>
__device__ __forceinline__ A gelu_erf_grad(A x) {
  A cdf = A(0.5) * (A(1) + dev_erf(x * A(kInvSqrt2)));
  A pdf = dev_exp(A(-0.5) * x * x) * A(kInvSqrt2Pi);
  return cdf + x * pdf;
}
template <class A>
__device__ __forceinline__ A silu_grad(A x) {
  A s = dev_sigmoid(x);
  return s * (A(1) + x * (A(1) - s));
}

}  // namespace mf::cuda
