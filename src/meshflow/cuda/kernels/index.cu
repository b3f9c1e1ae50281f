// CUDA kernels: index_select / index_add (embedding forward and backward), gather /
// scatter_add. Indices are i64 and already range-checked by the ops.
//
// Both accumulating kernels are deterministic and add in the CPU's order (ascending position
// in dy), in the storage type for f32/f64 — bit-identical to ops/cpu/index.cpp. For bf16/f16
// index_add sums a run in f32 and rounds once; scatter_add rounds after each added value:
// - index_add sorts (index, position) pairs with CUB's stable radix sort; a block per run of
//   equal indices adds its dy rows into the dx row in position order.
// - scatter_add gives each (outer, inner) column to one thread, which walks m in order.
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

// Checks of the (outer, n, inner) views the ops pass.
void check_3d(const Tensor& t, const char* op, const char* what) {
  check_cuda(t, op, what);
  MF_CHECK(t.ndim() == 3 && t.is_contiguous(), op, ": ", what, " ", t.str(), " must be a contiguous 3-D view");
}

// ---- index_select: rows of `row_bytes` bytes moved as words W (a size dividing the row and
// the alignment of both bases). out row (o, j) = x row (o, index[j]).
template <class W>
__global__ void index_select_kernel(const W* x, const int64_t* index, W* out, int64_t outer, int64_t n, int64_t m,
                                    int64_t row_words) {
  const int64_t total = outer * m * row_words;
  MF_GRID_STRIDE(t, total) {
    const int64_t w = t % row_words, row = t / row_words;  // row = o * m + j
    const int64_t j = row % m, o = row / m;
    out[t] = x[(o * n + index[j]) * row_words + w];
  }
}

template <class W>
void index_select_words(const Tensor& x, const Tensor& index, const Tensor& out, int64_t row_bytes) {
  const int64_t outer = out.shape(0), m = out.shape(1), n = x.shape(1), row_words = row_bytes / sizeof(W);
  const int64_t total = outer * m * row_words;
  index_select_kernel<W><<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const W>(x), ptr<const int64_t>(index), ptr<W>(out), outer, n, m, row_words);
  MF_CUDA_LAUNCH_CHECK();
}

// x (outer, n, inner), index (m) i64 in [0, n) -> out (outer, m, inner)
template <DType D>
void index_select_kernel_host(const Tensor& x, const Tensor& index, const Tensor& out) {
  const char* name = "index_select (cuda)";
  check_dtype(x, D, name, "x");
  check_dtype(out, D, name, "out");
  check_dtype(index, DType::kI64, name, "index");
  check_same_device(out, x, name, "out");
  check_same_device(index, x, name, "index");
  check_3d(x, name, "x");
  check_3d(out, name, "out");
  check_contiguous(index, name, "index");
  MF_CHECK(out.shape(0) == x.shape(0) && out.shape(2) == x.shape(2) && out.shape(1) == index.numel(), name, ": x ",
           x.str(), ", index ", index.str(), " and out ", out.str(), " do not match");
  if (out.numel() == 0) return;
  const int64_t row_bytes = x.shape(2) * static_cast<int64_t>(dtype_nbytes(D));
  auto fits = [&](int64_t w) {
    return row_bytes % w == 0 && reinterpret_cast<uintptr_t>(x.raw_data()) % w == 0 &&
           reinterpret_cast<uintptr_t>(out.raw_data()) % w == 0;
  };
  if (fits(16)) return index_select_words<uint4>(x, index, out, row_bytes);
  if (fits(8)) return index_select_words<uint64_t>(x, index, out, row_bytes);
  if (fits(4)) return index_select_words<uint32_t>(x, index, out, row_bytes);
  if (fits(2)) return index_select_words<uint16_t>(x, index, out, row_bytes);
  return index_select_words<uint8_t>(x, index, out, row_bytes);
}

// ---- index_add
// keys[j] = index[j] (as u32), positions[j] = j
__global__ void index_keys_kernel(const int64_t* index, uint32_t* keys, int32_t* positions, int64_t m) {
  MF_GRID_STRIDE(j, m) {
    keys[j] = static_cast<uint32_t>(index[j]);
    positions[j] = static_cast<int32_t>(j);
  }
}

constexpr int kAddThreads = 256;

// Block k over the sorted pairs: if k starts a run of equal keys, adds dy rows (o, positions[k..])
// into dx row (o, key) for every o, columns split over the block's threads, in position order.
template <class T>
__global__ void __launch_bounds__(kAddThreads) index_add_runs_kernel(const T* dy, const uint32_t* keys,
                                                                     const int32_t* positions, T* dx, int64_t outer,
                                                                     int64_t n, int64_t m, int64_t inner) {
  const int64_t k = blockIdx.x;
  const uint32_t key = keys[k];
  if (k > 0 && keys[k - 1] == key) return;  // not the head of its run
  int64_t end = k + 1;
  while (end < m && keys[end] == key) ++end;
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = dx + (o * n + key) * inner;
    const T* src = dy + o * m * inner;
    for (int64_t i = threadIdx.x; i < inner; i += kAddThreads) {
      Acc<T> acc = to_acc(dst[i]);
      for (int64_t p = k; p < end; ++p) acc += to_acc(src[static_cast<int64_t>(positions[p]) * inner + i]);
      dst[i] = from_acc<T>(acc);
    }
  }
}

// dx (outer, n, inner) += dy (outer, m, inner) scattered by index (m); deterministic order.
template <class T>
void index_add_kernel(const Tensor& dy, const Tensor& index, const Tensor& dx) {
  const char* name = "index_add (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(dy, dt, name, "dy");
  check_dtype(dx, dt, name, "dx");
  check_dtype(index, DType::kI64, name, "index");
  check_same_device(dx, dy, name, "dx");
  check_same_device(index, dy, name, "index");
  check_3d(dy, name, "dy");
  check_3d(dx, name, "dx");
  check_contiguous(index, name, "index");
  const int64_t outer = dy.shape(0), m = dy.shape(1), inner = dy.shape(2), n = dx.shape(1);
  MF_CHECK(dx.shape(0) == outer && dx.shape(2) == inner && index.numel() == m, name, ": dy ", dy.str(), ", index ",
           index.str(), " and dx ", dx.str(), " do not match");
  MF_CHECK(m <= INT32_MAX && n <= UINT32_MAX, name, ": ", m, " indices into ", n, " rows exceed the sort's 32-bit keys");
  if (m == 0 || outer * inner == 0) return;
  // Sort (key, position) pairs; radix sort is stable, so equal keys keep ascending positions.
  const Device dev = dy.device();
  Tensor keys_in = empty({m}, DType::kI32, dev), keys_out = empty({m}, DType::kI32, dev);
  Tensor pos_in = empty({m}, DType::kI32, dev), pos_out = empty({m}, DType::kI32, dev);
  index_keys_kernel<<<grid_for(m, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const int64_t>(index), ptr<uint32_t>(keys_in), ptr<int32_t>(pos_in), m);
  MF_CUDA_LAUNCH_CHECK();
  int end_bit = 1;
  while (end_bit < 32 && (uint64_t{1} << end_bit) < static_cast<uint64_t>(n)) ++end_bit;
  size_t temp_bytes = 0;
  MF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ptr<const uint32_t>(keys_in),
                                                ptr<uint32_t>(keys_out), ptr<const int32_t>(pos_in),
                                                ptr<int32_t>(pos_out), static_cast<int>(m), 0, end_bit,
                                                compute_stream()));
  Tensor temp = empty({static_cast<int64_t>(temp_bytes / 8 + 1)}, DType::kI64, dev);
  MF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, ptr<const uint32_t>(keys_in),
                                                ptr<uint32_t>(keys_out), ptr<const int32_t>(pos_in),
                                                ptr<int32_t>(pos_out), static_cast<int>(m), 0, end_bit,
                                                compute_stream()));
  index_add_runs_kernel<T><<<static_cast<unsigned>(m), kAddThreads, 0, compute_stream()>>>(
      ptr<const T>(dy), ptr<const uint32_t>(keys_out), ptr<const int32_t>(pos_out), ptr<T>(dx), outer, n, m, inner);
  MF_CUDA_LAUNCH_CHECK();
  // The scratch tensors are freed stream-ordered on the compute stream, after these kernels.
}

// ---- gather: out (o, j, i) = x (o, index (o, j, i), i)
template <class U>
__global__ void gather_kernel_dev(const U* x, const int64_t* index, U* out, int64_t n, int64_t m, int64_t inner,
                                  int64_t total) {
  MF_GRID_STRIDE(t, total) {
    const int64_t i = t % inner, o = t / (m * inner);
    out[t] = x[(o * n + index[t]) * inner + i];
  }
}

// x (outer, n, inner), index (outer, m, inner) i64 -> out (outer, m, inner)
template <DType D>
void gather_kernel(const Tensor& x, const Tensor& index, const Tensor& out) {
  const char* name = "gather (cuda)";
  check_dtype(x, D, name, "x");
  check_dtype(out, D, name, "out");
  check_dtype(index, DType::kI64, name, "index");
  check_same_device(out, x, name, "out");
  check_same_device(index, x, name, "index");
  check_3d(x, name, "x");
  check_3d(index, name, "index");
  check_3d(out, name, "out");
  MF_CHECK(index.shape() == out.shape() && x.shape(0) == out.shape(0) && x.shape(2) == out.shape(2), name, ": x ",
           x.str(), ", index ", index.str(), " and out ", out.str(), " do not match");
  const int64_t total = out.numel();
  if (total == 0) return;
  using U = typename DeviceTypeOf<D>::type;
  gather_kernel_dev<U><<<grid_for(total, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const U>(x), ptr<const int64_t>(index), ptr<U>(out), x.shape(1), out.shape(1), out.shape(2), total);
  MF_CUDA_LAUNCH_CHECK();
}

// ---- scatter_add: thread (o, i) walks j = 0..m-1: dx (o, index (o, j, i), i) += dy (o, j, i).
template <class T>
__global__ void scatter_add_kernel_dev(const T* dy, const int64_t* index, T* dx, int64_t outer, int64_t n, int64_t m,
                                       int64_t inner) {
  MF_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, i = c % inner;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t t = (o * m + j) * inner + i;
      T& d = dx[(o * n + index[t]) * inner + i];
      d = from_acc<T>(to_acc(d) + to_acc(dy[t]));
    }
  }
}

// dx (outer, n, inner) += dy (outer, m, inner) scattered by index (outer, m, inner).
template <class T>
void scatter_add_kernel(const Tensor& dy, const Tensor& index, const Tensor& dx) {
  const char* name = "scatter_add (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(dy, dt, name, "dy");
  check_dtype(dx, dt, name, "dx");
  check_dtype(index, DType::kI64, name, "index");
  check_same_device(dx, dy, name, "dx");
  check_same_device(index, dy, name, "index");
  check_3d(dy, name, "dy");
  check_3d(index, name, "index");
  check_3d(dx, name, "dx");
  MF_CHECK(index.shape() == dy.shape() && dx.shape(0) == dy.shape(0) && dx.shape(2) == dy.shape(2), name, ": dy ",
           dy.str(), ", index ", index.str(), " and dx ", dx.str(), " do not match");
  const int64_t outer = dy.shape(0), m = dy.shape(1), inner = dy.shape(2), n = dx.shape(1);
  if (outer * inner == 0 || m == 0) return;
  scatter_add_kernel_dev<T><<<grid_for(outer * inner, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const T>(dy), ptr<const int64_t>(index), ptr<T>(dx), outer, n, m, inner);
  MF_CUDA_LAUNCH_CHECK();
}

template <DType D>
void register_select(KernelRegistry& r) {
  r.add<kernels::IndexSelect>("index_select", DeviceType::kCUDA, D, index_select_kernel_host<D>);
  r.add<kernels::Gather>("gather", DeviceType::kCUDA, D, gather_kernel<D>);
}
template <class T>
void register_add(KernelRegistry& r) {
  constexpr DType D = dtype_of_device<T>();
  r.add<kernels::IndexAdd>("index_add", DeviceType::kCUDA, D, index_add_kernel<T>);
  r.add<kernels::ScatterAdd>("scatter_add", DeviceType::kCUDA, D, scatter_add_kernel<T>);
}

}  // namespace

void register_index(KernelRegistry& r) {
  register_select<DType::kF32>(r);
  register_select<DType::kF64>(r);
  register_select<DType::kBF16>(r);
  register_select<DType::kF16>(r);
  register_select<DType::kI32>(r);
  register_select<DType::kI64>(r);
  register_select<DType::kBool>(r);
  register_add<float>(r);
  register_add<double>(r);
  register_add<__nv_bfloat16>(r);
  register_add<__half>(r);
}

}  // namespace mf::cuda
