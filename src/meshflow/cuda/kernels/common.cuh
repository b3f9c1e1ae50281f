// Shared device-side helpers of the CUDA kernels: dtype dispatch (storage type -> f32/f64
// accumulation), strided indexing, warp/block reductions, launch sizes. Included only by .cu
// files under src/meshflow/cuda.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "meshflow/core/dtype.h"
#include "meshflow/cuda/runtime.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "meshflow/tensor/tensor.h"

namespace mf::cuda {

// ---- element types: storage type T, computed in Acc<T> (f32 for f32/bf16/f16, f64 for f64).
template <class T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <class T> using Acc = typename AccOf<T>::type;

template <class T> __device__ __forceinline__ Acc<T> to_acc(T x) { return static_cast<Acc<T>>(x); }
template <> __device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_acc<__half>(__half x) { return __half2float(x); }

// Round-to-nearest-even into the storage type (the same rounding as core/half.h).
template <class T> __device__ __forceinline__ T from_acc(Acc<T> x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }

// The device type of a meshflow dtype (host-side dispatch).
template <DType D> struct DeviceTypeOf;
template <> struct DeviceTypeOf<DType::kF32> { using type = float; };
template <> struct DeviceTypeOf<DType::kF64> { using type = double; };
template <> struct DeviceTypeOf<DType::kBF16> { using type = __nv_bfloat16; };
template <> struct DeviceTypeOf<DType::kF16> { using type = __half; };
template <> struct DeviceTypeOf<DType::kI32> { using type = int32_t; };
template <> struct DeviceTypeOf<DType::kI64> { using type = int64_t; };
template <> struct DeviceTypeOf<DType::kBool> { using type = bool; };

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---- strided indexing: logical linear index -> element offset (row-major logical order).
constexpr int kMaxDims = 8;
struct Strided {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  __device__ __forceinline__ int64_t offset(int64_t linear) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t i = linear % sizes[d];
      linear /= sizes[d];
      off += i * strides[d];
    }
    return off;
  }
};
// Host: the geometry of `t` (throws beyond kMaxDims). Its offset is already in raw_data().
inline Strided strided_of(const Tensor& t) {
  MF_CHECK(t.ndim() <= kMaxDims, "cuda: tensor ", t.str(), " has more than ", kMaxDims, " axes");
  Strided s;
  s.ndim = static_cast<int>(t.ndim());
  for (int d = 0; d < s.ndim; ++d) {
    s.sizes[d] = t.shape()[d];
    s.strides[d] = t.strides()[d];
  }
  return s;
}

// ---- reductions (every lane of the warp / thread of the block gets the result).
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// blockDim.x a multiple of 32, at most 1024; `shared` holds 32 values. Synchronises the block.
template <class A>
__device__ __forceinline__ A block_sum(A v, A* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shared[lane] : A(0);
  return warp_sum(v);
}
template <class A>
__device__ __forceinline__ A block_max(A v, A* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < nwarps ? shared[lane] : A(-INFINITY);
  return warp_max(v);
}

// ---- launch sizes for grid-stride loops over n elements.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(multiprocessor_count()) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}
#define MF_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace mf::cuda
