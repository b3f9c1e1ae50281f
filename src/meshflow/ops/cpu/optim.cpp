// CPU kernels: fused optimizer updates, one pass over parameter, gradient and state (AdamW reads
// the gradient times its grad_scale: clipping and the loss scale cost no pass of their own).
#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

// param, grad, m, v: same shape, contiguous
template <class T>
void adamw_kernel(const Tensor& pt, const Tensor& gt, const Tensor& mt, const Tensor& vt, const kernels::AdamWParams& a) {
  T* p = pt.data<T>();
  const T* g = gt.data<T>();
  T* m = mt.data<T>();
  T* v = vt.data<T>();
  const T b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2), eps = static_cast<T>(a.eps);
  const T decay = static_cast<T>(1.0 - a.lr * a.weight_decay);
  const T step_size = static_cast<T>(a.lr / a.bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(a.bias_correction2));
  const T gs = static_cast<T>(a.grad_scale);
  parallel_for(pt.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
      const T gi = gs * g[i];
      T mi = b1 * m[i] + (T(1) - b1) * gi;
      T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  });
}

template <class T>
void sgd_kernel(const Tensor& pt, const Tensor& gt, const Tensor& bt, double lr_d, double momentum_d, double wd_d) {
  T* p = pt.data<T>();
  const T* g = gt.data<T>();
  T* buf = momentum_d != 0.0 ? bt.data<T>() : nullptr;
  const T lr = static_cast<T>(lr_d), mom = static_cast<T>(momentum_d), wd = static_cast<T>(wd_d);
  parallel_for(pt.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
    if (buf) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        T b = mom * buf[i] + g[i] + wd * p[i];
        buf[i] = b;
        p[i] -= lr * b;
      }
    } else {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    }
  });
}

}  // namespace

void register_optim(KernelRegistry& r) {
  r.add<kernels::AdamWUpdate>("adamw_update", DeviceType::kCPU, DType::kF32, adamw_kernel<float>);
  r.add<kernels::AdamWUpdate>("adamw_update", DeviceType::kCPU, DType::kF64, adamw_kernel<double>);
  r.add<kernels::SgdUpdate>("sgd_update", DeviceType::kCPU, DType::kF32, sgd_kernel<float>);
  r.add<kernels::SgdUpdate>("sgd_update", DeviceType::kCPU, DType::kF64, sgd_kernel<double>);
}

}  // namespace mf::cpu
