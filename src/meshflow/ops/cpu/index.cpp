// CPU kernels: index_select / index_add (embedding), gather / scatter_add, where.
#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

// x (outer, n, inner), index (m) -> out (outer, m, inner)
template <class T>
void index_select_kernel(const Tensor& xt, const Tensor& idxt, const Tensor& outt) {
  const T* x = xt.data<T>();
  const int64_t* idx = idxt.data<int64_t>();
  T* out = outt.data<T>();
  int64_t m = idxt.numel(), inner = outt.shape(2), n = xt.shape(1), outer = outt.shape(0);
  parallel_for(outer * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / m, j = t % m;
      std::memcpy(out + t * inner, x + (o * n + idx[j]) * inner, inner * sizeof(T));
    }
  });
}

// dx (outer, n, inner) += dy (outer, m, inner) by index (m). Rows of dx may repeat in index,
// so threads split the inner axis (columns) and walk the index in order: deterministic.
template <class T>
void index_add_kernel(const Tensor& dyt, const Tensor& idxt, const Tensor& dxt) {
  const T* dy = dyt.data<T>();
  const int64_t* idx = idxt.data<int64_t>();
  T* dx = dxt.data<T>();
  int64_t m = idxt.numel(), inner = dyt.shape(2), n = dxt.shape(1), outer = dyt.shape(0);
  parallel_for(inner, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j) {
        const T* src = dy + (o * m + j) * inner;
        T* dst = dx + (o * n + idx[j]) * inner;
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) dst[i] += src[i];
      }
  });
}

// x (outer, n, inner), index (outer, m, inner) -> out (outer, m, inner)
template <class T>
void gather_kernel(const Tensor& xt, const Tensor& idxt, const Tensor& outt) {
  const T* x = xt.data<T>();
  const int64_t* idx = idxt.data<int64_t>();
  T* out = outt.data<T>();
  int64_t outer = idxt.shape(0), m = idxt.shape(1), inner = idxt.shape(2), n = xt.shape(1);
  parallel_for(outer * m, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / m;
      for (int64_t i = 0; i < inner; ++i) out[t * inner + i] = x[(o * n + idx[t * inner + i]) * inner + i];
    }
  });
}

// dx (outer, n, inner) += dy scattered by index (outer, m, inner); threads split `outer`.
template <class T>
void scatter_add_kernel(const Tensor& dyt, const Tensor& idxt, const Tensor& dxt) {
  const T* dy = dyt.data<T>();
  const int64_t* idx = idxt.data<int64_t>();
  T* dx = dxt.data<T>();
  int64_t outer = idxt.shape(0), m = idxt.shape(1), inner = idxt.shape(2), n = dxt.shape(1);
  parallel_for(outer, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t t = (o * m + j) * inner + i;
          dx[(o * n + idx[t]) * inner + i] += dy[t];
        }
  });
}

// cond/a/b contiguous (the op expands and copies them), out contiguous.
template <class T>
void where_kernel(const Tensor& ct, const Tensor& at, const Tensor& bt, const Tensor& outt) {
  const bool* c = ct.data<bool>();
  const T* a = at.data<T>();
  const T* b = bt.data<T>();
  T* out = outt.data<T>();
  parallel_for(outt.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = c[i] ? a[i] : b[i];
  });
}

template <class T>
void register_for(KernelRegistry& r) {
  constexpr DType dt = DTypeOf<T>::value;
  r.add<kernels::IndexSelect>("index_select", DeviceType::kCPU, dt, index_select_kernel<T>);
  r.add<kernels::Gather>("gather", DeviceType::kCPU, dt, gather_kernel<T>);
  r.add<kernels::Where>("where", DeviceType::kCPU, dt, where_kernel<T>);
}

}  // namespace

void register_index(KernelRegistry& r) {
  register_for<float>(r);
  register_for<double>(r);
  register_for<int64_t>(r);
  register_for<int32_t>(r);
  r.add<kernels::IndexAdd>("index_add", DeviceType::kCPU, DType::kF32, index_add_kernel<float>);
  r.add<kernels::IndexAdd>("index_add", DeviceType::kCPU, DType::kF64, index_add_kernel<double>);
  r.add<kernels::ScatterAdd>("scatter_add", DeviceType::kCPU, DType::kF32, scatter_add_kernel<float>);
  r.add<kernels::ScatterAdd>("scatter_add", DeviceType::kCPU, DType::kF64, scatter_add_kernel<double>);
}

}  // namespace mf::cpu
