// CUDA kernels drawing from Philox: dropout (forward and backward) and random fills. Each
// element's number is keyed by its offset in the logical tensor (LogicalSlice), with the same
// functions as the CPU kernels (random/philox.h), so a GPU draws exactly what the CPU draws:
// dropout masks and uniform words bit for bit; normals up to the last-ulp caveat noted in
// philox_normal (device log/cos).
#include <vector>

#include "meshflow/cuda/kernels/launch.cuh"
#include "meshflow/random/philox.h"

namespace mf::cuda {
namespace {

// Local flat index -> logical flat offset: base + geometry.offset(i) (local shape with the
// logical tensor's strides). Adjacent axes that stay consecutive in the logical tensor are
// merged, so a whole tensor (or a split of axis 0) is one axis of stride 1.
struct LogicalMap {
  uint64_t base = 0;
  Strided geometry;
  bool unit() const { return geometry.ndim == 1 && geometry.strides[0] == 1; }
};

LogicalMap logical_map(const Shape& local, const LogicalSlice& slice, const char* op) {
  const int64_t numel = shape_numel(local);
  LogicalMap map;
  if (slice.whole()) {
    map.geometry.ndim = 1;
    map.geometry.sizes[0] = std::max<int64_t>(numel, 1);
    map.geometry.strides[0] = 1;
    return map;
  }
  MF_CHECK(slice.logical_shape.size() == local.size() && slice.start.size() == local.size(), op,
           ": logical slice of rank ", slice.logical_shape.size(), " for a local tensor ", shape_str(local));
  for (size_t d = 0; d < local.size(); ++d)
    MF_CHECK(slice.start[d] >= 0 && slice.start[d] + local[d] <= slice.logical_shape[d], op, ": local piece ",
             shape_str(local), " at ", shape_str(slice.start), " exceeds logical shape ",
             shape_str(slice.logical_shape));
  const Strides ls = contiguous_strides(slice.logical_shape);
  for (size_t d = 0; d < local.size(); ++d) map.base += static_cast<uint64_t>(slice.start[d] * ls[d]);
  // Merge from the last axis: (size a, stride sa)(size b, stride sb) -> (a * b, sb) when sa == b * sb.
  std::vector<int64_t> sizes, strides;  // innermost first
  for (int64_t d = static_cast<int64_t>(local.size()) - 1; d >= 0; --d) {
    if (local[d] == 1) continue;
    if (!sizes.empty() && ls[d] == sizes.back() * strides.back()) {
      sizes.back() *= local[d];
    } else {
      sizes.push_back(local[d]);
      strides.push_back(ls[d]);
    }
  }
  if (sizes.empty()) {  // a single element (or all axes of size 1)
    sizes.push_back(1);
    strides.push_back(1);
  }
  MF_CHECK(static_cast<int>(sizes.size()) <= kMaxDims, op, ": logical slice with more than ", kMaxDims, " axes");
  map.geometry.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < map.geometry.ndim; ++d) {
    map.geometry.sizes[d] = sizes[map.geometry.ndim - 1 - d];
    map.geometry.strides[d] = strides[map.geometry.ndim - 1 - d];
  }
  return map;
}

// The word of logical position q, as the CPU draws it: lane q & 3 of Philox block q >> 2.
__device__ __forceinline__ uint32_t word_at(uint64_t seed, uint64_t stream, uint64_t q) {
  return philox_block(seed, stream, q >> 2).v[q & 3];
}

template <class T>
__device__ __forceinline__ T store_double(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(v);
  else return from_acc<T>(static_cast<float>(v));  // via f32, as the CPU's cast of a double
}

// What one word becomes.
template <class T>
struct DropoutF {
  const T* x;
  T* out;
  uint32_t threshold;  // keep iff the word's 24-bit uniform >= threshold
  Acc<T> keep_scale;
  __device__ __forceinline__ void operator()(int64_t i, uint32_t word) const {
    out[i] = (word >> 8) >= threshold ? from_acc<T>(to_acc(x[i]) * keep_scale) : from_acc<T>(Acc<T>(0));
  }
};
template <class T>
struct UniformF {
  T* out;
  double low, width;  // width = high - low
  __device__ __forceinline__ void operator()(int64_t i, uint32_t word) const {
    double u = static_cast<double>(static_cast<float>(word >> 8) * (1.0f / 16777216.0f));
    out[i] = store_double<T>(fma(width, u, low));
  }
};

// Logical positions base .. base + n - 1 consecutive: a thread per Philox block (4 positions).
template <class F>
__global__ void words_unit_kernel(uint64_t seed, uint64_t stream, uint64_t base, int64_t n, F f) {
  const uint64_t first = base >> 2, last = (base + static_cast<uint64_t>(n) - 1) >> 2;
  const int64_t nblocks = static_cast<int64_t>(last - first + 1);
  MF_GRID_STRIDE(k, nblocks) {
    const uint64_t blk = first + static_cast<uint64_t>(k);
    const Philox4x32 r = philox_block(seed, stream, blk);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const uint64_t q = blk * 4 + static_cast<uint64_t>(lane);
      if (q >= base && q < base + static_cast<uint64_t>(n)) f(static_cast<int64_t>(q - base), r.v[lane]);
    }
  }
}
// Any slice: a thread per element.
template <class F>
__global__ void words_strided_kernel(uint64_t seed, uint64_t stream, uint64_t base, Strided geometry, int64_t n, F f) {
  MF_GRID_STRIDE(i, n) f(i, word_at(seed, stream, base + static_cast<uint64_t>(geometry.offset(i))));
}

template <class F>
void for_each_word(const LogicalMap& map, int64_t n, uint64_t seed, uint64_t stream, F f) {
  if (n == 0) return;
  if (map.unit()) {
    const int64_t nblocks = static_cast<int64_t>(((map.base + static_cast<uint64_t>(n) - 1) >> 2) - (map.base >> 2) + 1);
    words_unit_kernel<<<grid_for(nblocks, kThreads), kThreads, 0, compute_stream()>>>(seed, stream, map.base, n, f);
  } else {
    words_strided_kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(seed, stream, map.base,
                                                                                  map.geometry, n, f);
  }
  MF_CUDA_LAUNCH_CHECK();
}

template <class T>
__global__ void normal_kernel(T* out, uint64_t seed, uint64_t stream, uint64_t base, Strided geometry, int64_t n,
                              double mean, double stddev) {
  MF_GRID_STRIDE(i, n) {
    const uint64_t q = base + static_cast<uint64_t>(geometry.offset(i));
    out[i] = store_double<T>(fma(stddev, philox_normal(seed, stream, q), mean));
  }
}

// out = x * keep / (1 - p); x, out contiguous.
template <class T>
void dropout_kernel(const Tensor& x, const Tensor& out, double p, uint64_t seed, uint64_t stream,
                    const LogicalSlice& slice) {
  const char* name = "dropout (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(x, dt, name, "x");
  check_dtype(out, dt, name, "out");
  check_same_device(out, x, name, "out");
  check_contiguous(x, name, "x");
  check_contiguous(out, name, "out");
  MF_CHECK(x.shape() == out.shape(), name, ": x ", x.str(), " and out ", out.str(), " differ in shape");
  MF_CHECK(p >= 0.0 && p < 1.0, name, ": p must be in [0, 1), got ", p);
  const LogicalMap map = logical_map(x.shape(), slice, name);
  // As the CPU: the scale rounded to the compute type (f32 for bf16/f16), the threshold from p in f64.
  const Acc<T> keep_scale = static_cast<Acc<T>>(1.0 / (1.0 - p));
  const uint32_t threshold = static_cast<uint32_t>(p * 16777216.0);
  for_each_word(map, x.numel(), seed, stream, DropoutF<T>{ptr<const T>(x), ptr<T>(out), threshold, keep_scale});
}

// dst contiguous: normal(a = mean, b = std) or uniform(a = low, b = high).
template <class T>
void random_fill_kernel(const Tensor& dst, bool normal, double a, double b, uint64_t seed, uint64_t stream,
                        const LogicalSlice& slice) {
  const char* name = "random_fill (cuda)";
  check_dtype(dst, dtype_of_device<T>(), name, "dst");
  check_contiguous(dst, name, "dst");
  const LogicalMap map = logical_map(dst.shape(), slice, name);
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (normal) {
    normal_kernel<T><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(ptr<T>(dst), seed, stream, map.base,
                                                                               map.geometry, n, a, b);
    MF_CUDA_LAUNCH_CHECK();
    return;
  }
  for_each_word(map, n, seed, stream, UniformF<T>{ptr<T>(dst), a, b - a});
}

template <class T>
void register_for(KernelRegistry& r) {
  constexpr DType D = dtype_of_device<T>();
  r.add<kernels::Dropout>("dropout", DeviceType::kCUDA, D, dropout_kernel<T>);
  r.add<kernels::RandomFill>("random_fill", DeviceType::kCUDA, D, random_fill_kernel<T>);
}

}  // namespace

void register_random(KernelRegistry& r) {
  register_for<float>(r);
  register_for<double>(r);
  register_for<__nv_bfloat16>(r);
  register_for<__half>(r);
}

}  // namespace mf::cuda
