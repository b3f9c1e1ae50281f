// CPU kernels: binary ops with broadcasting (strided inputs), unary ops and activations.
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/vec_math.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

template <class T>
inline T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
  }
  return T(0);
}

template <class T, BinaryOp OP>
void binary_rows(const T* a, const T* b, T* out, int64_t n, int64_t sa, int64_t sb) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(OP, a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    T bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(OP, a[i], bv);
  } else if (sa == 0 && sb == 1) {
    T av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(OP, av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(OP, a[i * sa], b[i * sb]);
  }
}

// out (shape) contiguous; a/b strided. Iterates rows of the last axis, split across threads.
template <class T, BinaryOp OP>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  int64_t nd = out.ndim();
  if (nd == 0) {
    *po = apply_binary(OP, *pa, *pb);
    return;
  }
  if (a.is_contiguous() && b.is_contiguous()) {
    parallel_for(out.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
      binary_rows<T, OP>(pa + lo, pb + lo, po + lo, hi - lo, 1, 1);
    });
    return;
  }
  for_each_row(out.shape(), a.strides(), b.strides(),
               [&](int64_t row, int64_t oa, int64_t ob, int64_t inner, int64_t sa, int64_t sb) {
                 binary_rows<T, OP>(pa + oa, pb + ob, po + row * inner, inner, sa, sb);
               });
}

template <class T>
void binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd: return binary_typed<T, BinaryOp::kAdd>(a, b, out);
    case BinaryOp::kSub: return binary_typed<T, BinaryOp::kSub>(a, b, out);
    case BinaryOp::kMul: return binary_typed<T, BinaryOp::kMul>(a, b, out);
    case BinaryOp::kDiv: return binary_typed<T, BinaryOp::kDiv>(a, b, out);
  }
}

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u): the sigmoid form has no cancellation in either tail.
template <class T>
inline T gelu_tanh(T x) {
  T u = T(kSqrt2OverPi) * (x + T(kGeluCoef) * x * x * x);
  return x * sigmoid(T(2) * u);
}

template <class T, class F>
void map_unary(const T* x, T* y, int64_t n, F f) {
  parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

// Gelu (tanh form) and silu are x * sigmoid(a(x)) with a = 2u or x. For f32 the exps of a
// chunk are computed together on full vectors (vec_math.h); returns false for other cases.
constexpr int64_t kSigmoidChunk = 512;

inline float sigmoid_arg(UnaryOp op, float x) {
  return op == UnaryOp::kSilu ? x : 2.0f * static_cast<float>(kSqrt2OverPi) * (x + static_cast<float>(kGeluCoef) * x * x * x);
}

template <class T>
bool sigmoid_family_forward(UnaryOp op, const T* x, T* y, int64_t n) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (op != UnaryOp::kGeluTanh && op != UnaryOp::kSilu) return false;
    const bool g = op == UnaryOp::kGeluTanh;
    const float a = g ? 2.0f * static_cast<float>(kSqrt2OverPi) : 1.0f, c = g ? static_cast<float>(kGeluCoef) : 0.0f;
    parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) { x_sigmoid_array(x + lo, y + lo, hi - lo, a, c); });
    return true;
  }
}

template <class T>
bool sigmoid_family_backward(UnaryOp op, const T* dy, const T* x, T* dx, int64_t n) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (op != UnaryOp::kGeluTanh && op != UnaryOp::kSilu) return false;
    const float k = static_cast<float>(kSqrt2OverPi), c3 = static_cast<float>(3 * kGeluCoef);
    parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
      alignas(64) float t[kSigmoidChunk];
      for (int64_t c0 = lo; c0 < hi; c0 += kSigmoidChunk) {
        int64_t m = std::min(kSigmoidChunk, hi - c0);
#pragma omp simd
        for (int64_t j = 0; j < m; ++j) t[j] = -sigmoid_arg(op, x[c0 + j]);
        exp_array(t, t, m);
        if (op == UnaryOp::kSilu) {
#pragma omp simd
          for (int64_t j = 0; j < m; ++j) {
            float v = x[c0 + j], s = 1.0f / (1.0f + t[j]);
            dx[c0 + j] = dy[c0 + j] * s * (1.0f + v * (1.0f - s));
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < m; ++j) {
            float v = x[c0 + j], s = 1.0f / (1.0f + t[j]);
            float du = k * (1.0f + c3 * v * v);
            dx[c0 + j] = dy[c0 + j] * (s + 2.0f * v * s * (1.0f - s) * du);
          }
        }
      }
    });
    return true;
  }
}

template <class T>
void unary_kernel(UnaryOp op, double alpha, const Tensor& xt, const Tensor& yt) {
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  int64_t n = xt.numel();
  T al = static_cast<T>(alpha);
  if (sigmoid_family_forward<T>(op, x, y, n)) return;
  switch (op) {
    case UnaryOp::kNeg: return map_unary(x, y, n, [](T v) { return -v; });
    case UnaryOp::kScale: return map_unary(x, y, n, [al](T v) { return v * al; });
    case UnaryOp::kAddScalar: return map_unary(x, y, n, [al](T v) { return v + al; });
    case UnaryOp::kExp: return map_unary(x, y, n, [](T v) { return std::exp(v); });
    case UnaryOp::kLog: return map_unary(x, y, n, [](T v) { return std::log(v); });
    case UnaryOp::kSqrt: return map_unary(x, y, n, [](T v) { return std::sqrt(v); });
    case UnaryOp::kGeluTanh: return map_unary(x, y, n, [](T v) { return gelu_tanh(v); });
    case UnaryOp::kGeluErf:
      return map_unary(x, y, n, [](T v) { return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476))); });
    case UnaryOp::kSilu: return map_unary(x, y, n, [](T v) { return v * sigmoid(v); });
    case UnaryOp::kRelu: return map_unary(x, y, n, [](T v) { return v > T(0) ? v : T(0); });
    case UnaryOp::kTanh: return map_unary(x, y, n, [](T v) { return std::tanh(v); });
  }
}

template <class T>
void activation_backward_kernel(UnaryOp op, const Tensor& dyt, const Tensor& xt, const Tensor& dxt) {
  const T* dy = dyt.data<T>();
  const T* x = xt.data<T>();
  T* dx = dxt.data<T>();
  int64_t n = xt.numel();
  if (sigmoid_family_backward<T>(op, dy, x, dx, n)) return;
  auto run = [&](auto f) {
    parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dx[i] = dy[i] * f(x[i]);
    });
  };
  switch (op) {
    case UnaryOp::kGeluTanh:
      return run([](T v) {
        T u = T(kSqrt2OverPi) * (v + T(kGeluCoef) * v * v * v);
        T s = sigmoid(T(2) * u);
        T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCoef) * v * v);
        return s + T(2) * v * s * (T(1) - s) * du;
      });
    case UnaryOp::kGeluErf:
      return run([](T v) {
        T cdf = T(0.5) * (T(1) + std::erf(v * T(0.7071067811865476)));
        T pdf = std::exp(T(-0.5) * v * v) * T(0.3989422804014327);
        return cdf + v * pdf;
      });
    case UnaryOp::kSilu:
      return run([](T v) {
        T s = sigmoid(v);
        return s * (T(1) + v * (T(1) - s));
      });
    case UnaryOp::kRelu: return run([](T v) { return v > T(0) ? T(1) : T(0); });
    case UnaryOp::kTanh:
      return run([](T v) {
        const T t = std::tanh(v);
        return T(1) - t * t;
      });
    default: MF_THROW("activation_backward: op ", static_cast<int>(op), " is not an activation");
  }
}

}  // namespace

void register_elementwise(KernelRegistry& r) {
  r.add<kernels::Binary>("binary", DeviceType::kCPU, DType::kF32, binary_kernel<float>);
  r.add<kernels::Binary>("binary", DeviceType::kCPU, DType::kF64, binary_kernel<double>);
  r.add<kernels::Unary>("unary", DeviceType::kCPU, DType::kF32, unary_kernel<float>);
  r.add<kernels::Unary>("unary", DeviceType::kCPU, DType::kF64, unary_kernel<double>);
  r.add<kernels::ActivationBackward>("activation_backward", DeviceType::kCPU, DType::kF32,
                                     activation_backward_kernel<float>);
  r.add<kernels::ActivationBackward>("activation_backward", DeviceType::kCPU, DType::kF64,
                                     activation_backward_kernel<double>);
}

}  // namespace mf::cpu
