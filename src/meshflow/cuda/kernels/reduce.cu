// CUDA kernels: sum, max (with i64 argmax) and sum of squares over the middle axis of a
// contiguous (outer, r, inner) view -> (outer, inner). Sums accumulate in f64 for every dtype
// (as ops/cpu/reduce.cpp does) and round once. Max returns the first index of the maximum, and a
// NaN at index 0 wins as on the CPU (whose scan starts from element 0 and never replaces it by
// a comparison with a NaN); later NaNs are skipped.
//
// Long reductions are split over blocks: each (split, output) writes a partial, then one thread
// per output combines its partials in split order. Splits depend only on the shape, so results
// are deterministic (identical run to run and across GPU models).
#include <climits>

#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

using kernels::ReduceOp;

constexpr int64_t kNoIndex = INT64_MAX;
constexpr int64_t kTargetBlocks = 1024;  // enough to fill an H100/H200 several times over

template <class A>
struct MaxState {
  A val;
  int64_t idx;  // kNoIndex: no candidate yet
};

// Accumulation policy of op OP over storage type T.
template <class T, ReduceOp OP>
struct Reducer {
  using State = double;
  static __device__ __forceinline__ State init() { return 0.0; }
  static __device__ __forceinline__ void add(State& s, T x, int64_t) {
    double v = static_cast<double>(to_acc(x));
    if constexpr (OP == ReduceOp::kSumSquares) s += v * v;
    else s += v;
  }
  // a holds earlier splits / threads than b (sums: the order is fixed by the caller).
  static __device__ __forceinline__ State combine(State a, State b) { return a + b; }
};
template <class T>
struct Reducer<T, ReduceOp::kMax> {
  using A = Acc<T>;
  using State = MaxState<A>;
  static __device__ __forceinline__ State init() { return {A(0), kNoIndex}; }
  static __device__ __forceinline__ bool better(A v, int64_t j, const State& s) {
    return s.idx == kNoIndex || v > s.val || (v == s.val && j < s.idx);
  }
  static __device__ __forceinline__ void add(State& s, T x, int64_t j) {
    A v = to_acc(x);
    if (!isnan(v) && better(v, j, s)) s = {v, j};
  }
  static __device__ __forceinline__ State combine(State a, State b) {
    return b.idx != kNoIndex && better(b.val, b.idx, a) ? b : a;
  }
};

template <class T>
__device__ __forceinline__ T store_from_double(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(v);
  else return from_acc<T>(static_cast<float>(v));
}

// Writes output q = (o, i) from its final state. x is the input (max reads the winner back).
template <class T, ReduceOp OP>
__device__ __forceinline__ void write_result(typename Reducer<T, OP>::State s, const T* x, int64_t r, int64_t inner,
                                             int64_t q, T* out, int64_t* argmax) {
  if constexpr (OP == ReduceOp::kMax) {
    const int64_t o = q / inner, i = q % inner;
    const T* col = x + o * r * inner + i;  // element j of this reduction: col[j * inner]
    int64_t j = s.idx;
    if (j == kNoIndex || isnan(to_acc(col[0]))) j = 0;
    out[q] = col[j * inner];
    argmax[q] = j;
  } else {
    out[q] = store_from_double<T>(s);
  }
}

// Shared-memory tree reduction of one State per thread (n threads, a power of two), in a fixed
// order. Returns the result in thread 0.
template <class R>
__device__ __forceinline__ typename R::State tree_reduce(typename R::State s, typename R::State* sh, int tid, int n) {
  sh[tid] = s;
  __syncthreads();
  for (int w = n / 2; w > 0; w /= 2) {
    if (tid < w) sh[tid] = R::combine(sh[tid], sh[tid + w]);
    __syncthreads();
  }
  return sh[0];
}

constexpr int kRowThreads = 256;  // power of two

// inner == 1: block (split s = blockIdx.y, row o = blockIdx.x) reduces x[o, chunk] of its row.
// partial: (splits, outer) states when splits > 1, else the result is written.
template <class T, ReduceOp OP>
__global__ void __launch_bounds__(kRowThreads) reduce_rows_kernel(const T* x, int64_t outer, int64_t r, int64_t chunk,
                                                                  T* out, int64_t* argmax,
                                                                  typename Reducer<T, OP>::State* partial) {
  using R = Reducer<T, OP>;
  __shared__ typename R::State sh[kRowThreads];
  const int64_t o = blockIdx.x, s = blockIdx.y;
  const int64_t j0 = s * chunk, j1 = min(r, j0 + chunk);
  const T* row = x + o * r;
  typename R::State st = R::init();
  for (int64_t j = j0 + threadIdx.x; j < j1; j += kRowThreads) R::add(st, row[j], j);
  st = tree_reduce<R>(st, sh, threadIdx.x, kRowThreads);
  if (threadIdx.x != 0) return;
  if (gridDim.y == 1) write_result<T, OP>(st, x, r, 1, o, out, argmax);
  else partial[s * outer + o] = st;
}

constexpr int kColX = 32, kColY = 8;  // block (kColX columns, kColY row lanes); kColY a power of two

// inner > 1: block (split s = blockIdx.y, (o, column tile) = blockIdx.x) reduces rows
// [s * chunk, ...) of kColX consecutive columns. partial: (splits, outer * inner) states.
template <class T, ReduceOp OP>
__global__ void __launch_bounds__(kColX* kColY) reduce_cols_kernel(const T* x, int64_t outer, int64_t r, int64_t inner,
                                                                   int64_t chunk, T* out, int64_t* argmax,
                                                                   typename Reducer<T, OP>::State* partial) {
  using R = Reducer<T, OP>;
  __shared__ typename R::State sh[kColY][kColX];
  const int64_t tiles = (inner + kColX - 1) / kColX;
  const int64_t o = blockIdx.x / tiles, i = (blockIdx.x % tiles) * kColX + threadIdx.x, s = blockIdx.y;
  const int64_t j0 = s * chunk, j1 = min(r, j0 + chunk);
  typename R::State st = R::init();
  if (i < inner) {
    const T* col = x + o * r * inner + i;
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kColY) R::add(st, col[j * inner], j);
  }
  sh[threadIdx.y][threadIdx.x] = st;
  __syncthreads();
  if (threadIdx.y != 0 || i >= inner) return;
  for (int y = 1; y < kColY; ++y) st = R::combine(st, sh[y][threadIdx.x]);
  const int64_t q = o * inner + i;
  if (gridDim.y == 1) write_result<T, OP>(st, x, r, inner, q, out, argmax);
  else partial[s * outer * inner + q] = st;
}

// One thread per output q: combines partial[0..splits) in order.
template <class T, ReduceOp OP>
__global__ void reduce_finish_kernel(const typename Reducer<T, OP>::State* partial, int64_t splits, int64_t nout,
                                     const T* x, int64_t r, int64_t inner, T* out, int64_t* argmax) {
  using R = Reducer<T, OP>;
  MF_GRID_STRIDE(q, nout) {
    typename R::State st = partial[q];
    for (int64_t s = 1; s < splits; ++s) st = R::combine(st, partial[s * nout + q]);
    write_result<T, OP>(st, x, r, inner, q, out, argmax);
  }
}

// The number of splits of the r axis: enough blocks in all, each split at least min_chunk long.
inline int64_t splits_for(int64_t blocks, int64_t r, int64_t min_chunk) {
  int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  int64_t most = std::max<int64_t>(1, r / min_chunk);
  return std::max<int64_t>(1, std::min<int64_t>({want, most, 65535}));
}

template <class T, ReduceOp OP>
void reduce_typed(const Tensor& xt, int64_t outer, int64_t r, int64_t inner, const Tensor& outt, const Tensor& argt) {
  using State = typename Reducer<T, OP>::State;
  const T* x = ptr<const T>(xt);
  T* out = ptr<T>(outt);
  int64_t* arg = OP == ReduceOp::kMax ? ptr<int64_t>(argt) : nullptr;
  const int64_t nout = outer * inner;
  const bool rows = inner == 1;
  const int64_t blocks = rows ? outer : outer * ((inner + kColX - 1) / kColX);
  MF_CHECK(blocks <= INT32_MAX, "reduce (cuda): ", outer, " x ", inner, " outputs are too many for one grid");
  const int64_t splits = splits_for(blocks, r, rows ? 16 * kRowThreads : 32 * kColY);
  const int64_t chunk = (r + splits - 1) / splits;
  Tensor scratch;
  State* partial = nullptr;
  if (splits > 1) {
    const int64_t nbytes = splits * nout * static_cast<int64_t>(sizeof(State));
    scratch = empty({(nbytes + 7) / 8}, DType::kI64, xt.device());
    partial = ptr<State>(scratch);
  }
  dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
  if (rows) {
    reduce_rows_kernel<T, OP><<<grid, kRowThreads, 0, compute_stream()>>>(x, outer, r, chunk, out, arg, partial);
  } else {
    reduce_cols_kernel<T, OP><<<grid, dim3(kColX, kColY), 0, compute_stream()>>>(x, outer, r, inner, chunk, out, arg,
                                                                               partial);
  }
  MF_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_finish_kernel<T, OP><<<grid_for(nout, kThreads), kThreads, 0, compute_stream()>>>(partial, splits, nout, x,
                                                                                              r, inner, out, arg);
    MF_CUDA_LAUNCH_CHECK();
  }
  // `scratch` is released here: a stream-ordered free on the compute stream, after the kernels.
}

// x contiguous viewed as (outer, r, inner) -> out (outer, inner); argmax (outer, inner) i64 for kMax.
template <class T>
void reduce_kernel(ReduceOp op, const Tensor& x, int64_t outer, int64_t r, int64_t inner, const Tensor& out,
                   const Tensor& argmax) {
  const char* name = "reduce (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(x, dt, name, "x");
  check_dtype(out, dt, name, "out");
  check_same_device(out, x, name, "out");
  check_contiguous(x, name, "x");
  check_contiguous(out, name, "out");
  MF_CHECK(outer >= 0 && r >= 0 && inner >= 0 && outer * r * inner == x.numel(), name, ": view (", outer, ", ", r, ", ",
           inner, ") does not match x ", x.str());
  check_numel(out, outer * inner, name, "out");
  if (op == ReduceOp::kMax) {
    check_dtype(argmax, DType::kI64, name, "argmax");
    check_same_device(argmax, x, name, "argmax");
    check_contiguous(argmax, name, "argmax");
    check_numel(argmax, outer * inner, name, "argmax");
    MF_CHECK(r > 0 || outer * inner == 0, name, ": max over an empty axis of ", x.str());
  }
  if (outer * inner == 0) return;
  switch (op) {
    case ReduceOp::kSum: return reduce_typed<T, ReduceOp::kSum>(x, outer, r, inner, out, argmax);
    case ReduceOp::kMax: return reduce_typed<T, ReduceOp::kMax>(x, outer, r, inner, out, argmax);
    case ReduceOp::kSumSquares: return reduce_typed<T, ReduceOp::kSumSquares>(x, outer, r, inner, out, argmax);
  }
  MF_THROW(name, ": unknown reduce op ", static_cast<int>(op));
}

}  // namespace

void register_reduce(KernelRegistry& r) {
  r.add<kernels::Reduce>("reduce", DeviceType::kCUDA, DType::kF32, reduce_kernel<float>);
  r.add<kernels::Reduce>("reduce", DeviceType::kCUDA, DType::kF64, reduce_kernel<double>);
  r.add<kernels::Reduce>("reduce", DeviceType::kCUDA, DType::kBF16, reduce_kernel<__nv_bfloat16>);
  r.add<kernels::Reduce>("reduce", DeviceType::kCUDA, DType::kF16, reduce_kernel<__half>);
}

}  // namespace mf::cuda
