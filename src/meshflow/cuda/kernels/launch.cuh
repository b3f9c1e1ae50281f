// Helpers shared by the memory-bound kernel families (elementwise, copy, reduce, index, softmax,
// random, rope, optim): argument checks that throw naming the op, 16-byte packs for contiguous
// fast paths, and the two generic contiguous map kernels (one and two inputs).
#pragma once
#include <cstdint>
#include <type_traits>

#include "meshflow/cuda/kernels/common.cuh"

namespace mf::cuda {

// The meshflow dtype of a device element type (the inverse of DeviceTypeOf).
template <class T>
constexpr DType dtype_of_device() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  else if constexpr (std::is_same_v<T, double>) return DType::kF64;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return DType::kBF16;
  else if constexpr (std::is_same_v<T, __half>) return DType::kF16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  else {
    static_assert(std::is_same_v<T, bool>, "no meshflow dtype for this device type");
    return DType::kBool;
  }
}

// ---- host-side checks (throw mf::Error naming the op and the tensor).
inline void check_cuda(const Tensor& t, const char* op, const char* what) {
  MF_CHECK(t.defined(), op, ": ", what, " is undefined");
  MF_CHECK(t.device().type == DeviceType::kCUDA, op, ": ", what, " ", t.str(), " is not on a CUDA device");
}
inline void check_dtype(const Tensor& t, DType dt, const char* op, const char* what) {
  check_cuda(t, op, what);
  MF_CHECK(t.dtype() == dt, op, ": ", what, " ", t.str(), " must be ", dtype_name(dt));
}
inline void check_contiguous(const Tensor& t, const char* op, const char* what) {
  MF_CHECK(t.is_contiguous(), op, ": ", what, " ", t.str(), " must be contiguous");
}
inline void check_numel(const Tensor& t, int64_t numel, const char* op, const char* what) {
  MF_CHECK(t.numel() == numel, op, ": ", what, " ", t.str(), " must have ", numel, " elements");
}
// Same device (type and index) as `ref`.
inline void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* what) {
  MF_CHECK(t.device() == ref.device(), op, ": ", what, " ", t.str(), " is on ", t.device().str(), ", expected ",
           ref.device().str());
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---- 16-byte packs: kPack<T> elements of T loaded/stored with one vector instruction.
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
template <class T>
inline constexpr int kPack = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

// ---- generic contiguous maps. V elements per step (a pack when every pointer is 16-byte
// aligned, else 1); the tail (n % V) element by element.
// y[i] = f(x[i])
template <int V, class T, class U, class F>
__global__ void map1_kernel(const T* x, U* y, int64_t n, F f) {
  const int64_t npacks = n / V;
  MF_GRID_STRIDE(p, npacks) {
    Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    Pack<U, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = f(in.v[j]);
    reinterpret_cast<Pack<U, V>*>(y)[p] = out;
  }
  for (int64_t i = npacks * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] = f(x[i]);
}
// y[i] = f(a[i], b[i])
template <int V, class T, class F>
__global__ void map2_kernel(const T* a, const T* b, T* y, int64_t n, F f) {
  const int64_t npacks = n / V;
  MF_GRID_STRIDE(p, npacks) {
    Pack<T, V> pa = reinterpret_cast<const Pack<T, V>*>(a)[p];
    Pack<T, V> pb = reinterpret_cast<const Pack<T, V>*>(b)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = f(pa.v[j], pb.v[j]);
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
  }
  for (int64_t i = npacks * V + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] = f(a[i], b[i]);
}

constexpr int kThreads = 256;

// Host: launches map1 on the compute stream, in packs of V = 16 / max(sizeof(T), sizeof(U))
// elements when x and y are aligned to their packs. x and y may alias exactly (in place: no
// __restrict__ above).
template <class T, class U, class F>
void launch_map1(const T* x, U* y, int64_t n, F f) {
  if (n <= 0) return;
  constexpr int V = kPack<T> < kPack<U> ? kPack<T> : kPack<U>;
  if constexpr (V > 1) {
    if (reinterpret_cast<uintptr_t>(x) % (sizeof(T) * V) == 0 && reinterpret_cast<uintptr_t>(y) % (sizeof(U) * V) == 0) {
      map1_kernel<V><<<grid_for((n + V - 1) / V, kThreads), kThreads, 0, compute_stream()>>>(x, y, n, f);
      MF_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  map1_kernel<1><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(x, y, n, f);
  MF_CUDA_LAUNCH_CHECK();
}
template <class T, class F>
void launch_map2(const T* a, const T* b, T* y, int64_t n, F f) {
  if (n <= 0) return;
  constexpr int V = kPack<T>;
  if constexpr (V > 1) {
    if (aligned16(a) && aligned16(b) && aligned16(y)) {
      map2_kernel<V><<<grid_for((n + V - 1) / V, kThreads), kThreads, 0, compute_stream()>>>(a, b, y, n, f);
      MF_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  map2_kernel<1><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(a, b, y, n, f);
  MF_CUDA_LAUNCH_CHECK();
}

}  // namespace mf::cuda
