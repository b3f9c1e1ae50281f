// CPU kernels: softmax and log_softmax over the last axis, forward and backward.
#include <limits>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/vec_math.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

// x (N,C) -> y (N,C)
template <class T>
void softmax_fwd(const Tensor& xt, const Tensor& yt, bool log) {
  int64_t C = xt.shape(-1), N = C == 0 ? 0 : xt.numel() / C;
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / std::max<int64_t>(C, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* xr = x + n * C;
      T* yr = y + n * C;
      T m = max_array(xr, C);
      if (m == -std::numeric_limits<T>::infinity()) m = 0;  // all -inf: keep exp finite
      if (log) {
        T lse = m + std::log(exp_shift_sum(xr, m, static_cast<T*>(nullptr), C));
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] - lse;
      } else {
        T inv = T(1) / exp_shift_sum(xr, m, yr, C);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) yr[c] *= inv;
      }
    }
  });
}

// dy, y (N,C) -> dx (N,C): softmax dx = y (dy - <dy, y>); log_softmax dx = dy - exp(y) sum(dy)
template <class T>
void softmax_bwd(const Tensor& dyt, const Tensor& yt, const Tensor& dxt, bool log) {
  int64_t C = yt.shape(-1), N = C == 0 ? 0 : yt.numel() / C;
  const T* dy = dyt.data<T>();
  const T* y = yt.data<T>();
  T* dx = dxt.data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / std::max<int64_t>(C, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const T* dyr = dy + n * C;
      const T* yr = y + n * C;
      T* dxr = dx + n * C;
      T s = 0;
      if (log) {
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; ++c) s += dyr[c];
        exp_array(yr, dxr, C);  // softmax = exp(log_softmax)
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) dxr[c] = dyr[c] - dxr[c] * s;
      } else {
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; ++c) s += dyr[c] * yr[c];
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) dxr[c] = yr[c] * (dyr[c] - s);
      }
    }
  });
}

}  // namespace

void register_softmax(KernelRegistry& r) {
  r.add<kernels::SoftmaxForward>("softmax", DeviceType::kCPU, DType::kF32, softmax_fwd<float>);
  r.add<kernels::SoftmaxForward>("softmax", DeviceType::kCPU, DType::kF64, softmax_fwd<double>);
  r.add<kernels::SoftmaxBackward>("softmax_backward", DeviceType::kCPU, DType::kF32, softmax_bwd<float>);
  r.add<kernels::SoftmaxBackward>("softmax_backward", DeviceType::kCPU, DType::kF64, softmax_bwd<double>);
}

}  // namespace mf::cpu
