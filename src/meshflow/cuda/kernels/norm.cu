// CUDA kernels: layer norm and RMS norm over the last axis, forward and backward, for f32, f64,
// bf16 and f16 (half inputs computed in f32). The same formulas as ops/cpu/norm.cpp.
//
// Forward and dx: one block per row (two-pass mean/variance like the CPU kernel; the row is
// re-read from L1/L2). dweight/dbias: per-chunk partial sums over fixed chunks of rows (one
// thread per column), then a second kernel sums the chunks in order: deterministic, no atomics.
// mean/rstd have the dtype of x, or f32 for bf16/f16 inputs (whichever the op allocates).
#include "meshflow/cuda/kernels/common.cuh"

namespace mf::cuda {
namespace {

// Threads of a row block: about 4 elements per thread, a multiple of 32 in [32, 512].
unsigned row_threads(int64_t C) {
  int64_t t = (C + 3) / 4;
  t = (t + 31) / 32 * 32;
  return static_cast<unsigned>(std::min<int64_t>(512, std::max<int64_t>(32, t)));
}

// ---- host-side checks (throw naming op, tensor, expected shape and dtype)
void check_tensor(const char* op, const char* what, const Tensor& t, DType dtype, const Shape& shape) {
  MF_CHECK(t.defined(), op, ": ", what, " is undefined");
  MF_CHECK(t.device().type == DeviceType::kCUDA, op, ": ", what, " ", t.str(), " is not on a CUDA device");
  MF_CHECK(t.dtype() == dtype, op, ": ", what, " ", t.str(), " must be ", dtype_name(dtype));
  MF_CHECK(t.shape() == shape, op, ": ", what, " ", t.str(), " has the wrong shape (expected ", shape_str(shape), ")");
  MF_CHECK(t.is_contiguous(), op, ": ", what, " ", t.str(), " must be contiguous");
}

// x viewed as (N, C): N rows of the last axis.
struct Rows {
  int64_t n = 0, c = 0;
};
Rows rows_of(const char* op, const Tensor& x) {
  MF_CHECK(x.defined() && x.ndim() >= 1, op, ": x must have at least 1 axis");
  Rows r;
  r.c = x.shape(-1);
  r.n = r.c == 0 ? 0 : x.numel() / r.c;
  MF_CHECK(r.n <= 0x7fffffff, op, ": x ", x.str(), " has more than 2^31-1 rows");
  return r;
}
Shape rows_shape(const Tensor& x) {
  Shape s = x.shape();
  s.pop_back();
  return s;
}

// ---- device code. T: storage type of x/w/b/y/dy/dx; S: storage type of mean/rstd; A = Acc<T>
// (== Acc<S>: S is T, or f32 for half T).

// x, y (N,C); w, b (C) (b may be null); mean (N) (null for RMS norm), rstd (N). grid N, block row_threads.
template <class T, class S>
__global__ void norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                    double eps, T* __restrict__ y, S* __restrict__ mean, S* __restrict__ rstd,
                                    int64_t C, bool rms) {
  using A = Acc<T>;
  __shared__ A shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * C;
  T* yr = y + row * C;
  A mu = 0;
  if (!rms) {
    A s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += to_acc(xr[c]);
    s = block_sum(s, shared);
    mu = s / static_cast<A>(C);
  }
  A v = 0;  // sum of (x - mu)^2 (layer norm) or x^2 (RMS norm)
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A d = to_acc(xr[c]) - mu;
    v += d * d;
  }
  v = block_sum(v, shared);
  const A rs = A(1) / sqrt(v / static_cast<A>(C) + static_cast<A>(eps));
  if (threadIdx.x == 0) {
    if (mean) mean[row] = from_acc<S>(mu);
    rstd[row] = from_acc<S>(rs);
  }
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A o = (to_acc(xr[c]) - mu) * rs * to_acc(w[c]);
    yr[c] = from_acc<T>(b ? o + to_acc(b[c]) : o);
  }
}

// dx (N,C) = rs * (dy*w - mean(dy*w) - xhat * mean(dy*w*xhat)); the mean(dy*w) term only for
// layer norm (mean != null). grid N, block row_threads.
template <class T, class S>
__global__ void norm_backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                        const S* __restrict__ mean, const S* __restrict__ rstd, T* __restrict__ dx,
                                        int64_t C) {
  using A = Acc<T>;
  __shared__ A shared[32];
  const int64_t row = blockIdx.x;
  const T* dyr = dy + row * C;
  const T* xr = x + row * C;
  T* dxr = dx + row * C;
  const A mu = mean ? static_cast<A>(to_acc(mean[row])) : A(0);
  const A rs = static_cast<A>(to_acc(rstd[row]));
  A sum_g = 0, sum_gx = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A xh = (to_acc(xr[c]) - mu) * rs;
    const A g = to_acc(dyr[c]) * to_acc(w[c]);
    sum_g += g;
    sum_gx += g * xh;
  }
  sum_g = block_sum(sum_g, shared);
  sum_gx = block_sum(sum_gx, shared);
  const A inv_c = A(1) / static_cast<A>(C);
  const A mg = mean ? sum_g * inv_c : A(0), mgx = sum_gx * inv_c;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A xh = (to_acc(xr[c]) - mu) * rs;
    dxr[c] = from_acc<T>(rs * (to_acc(dyr[c]) * to_acc(w[c]) - mg - xh * mgx));
  }
}

// partial (nchunks, 2, C): [chunk][0][c] = sum over the chunk's rows of dy*xhat, [chunk][1][c] =
// sum of dy. grid (ceil(C / blockDim), nchunks), one thread per column.
template <class T, class S>
__global__ void norm_backward_partial_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                             const S* __restrict__ mean, const S* __restrict__ rstd,
                                             Acc<T>* __restrict__ partial, int64_t N, int64_t C,
                                             int64_t rows_per_chunk) {
  using A = Acc<T>;
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
  A pw = 0, pb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const A mu = mean ? static_cast<A>(to_acc(mean[r])) : A(0);
    const A rs = static_cast<A>(to_acc(rstd[r]));
    const A g = to_acc(dy[r * C + c]);
    pw += g * (to_acc(x[r * C + c]) - mu) * rs;
    pb += g;
  }
  partial[(chunk * 2) * C + c] = pw;
  partial[(chunk * 2 + 1) * C + c] = pb;
}

// dw (C), db (C) (either may be null) = the chunks' partials summed in chunk order.
template <class T>
__global__ void norm_backward_params_kernel(const Acc<T>* __restrict__ partial, int64_t nchunks, int64_t C,
                                            T* __restrict__ dw, T* __restrict__ db) {
  using A = Acc<T>;
  MF_GRID_STRIDE(c, C) {
    A sw = 0, sb = 0;
    for (int64_t k = 0; k < nchunks; ++k) {
      sw += partial[(k * 2) * C + c];
      sb += partial[(k * 2 + 1) * C + c];
    }
    if (dw) dw[c] = from_acc<T>(sw);
    if (db) db[c] = from_acc<T>(sb);
  }
}

// ---- host launchers

template <class T, class S>
void launch_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y,
                    const Tensor& mean, const Tensor& rstd, Rows r, bool rms) {
  if (r.n == 0 || r.c == 0) return;
  norm_forward_kernel<T, S><<<static_cast<unsigned>(r.n), row_threads(r.c), 0, compute_stream()>>>(
      ptr<const T>(x), ptr<const T>(w), b.defined() ? ptr<const T>(b) : nullptr, eps, ptr<T>(y),
      mean.defined() ? ptr<S>(mean) : nullptr, ptr<S>(rstd), r.c, rms);
  MF_CUDA_LAUNCH_CHECK();
}

template <class T, class S>
void launch_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                     const Tensor& dx, const Tensor& dw, const Tensor& db, Rows r) {
  using A = Acc<T>;
  if (r.c == 0) return;
  cudaStream_t stream = compute_stream();
  const S* mean_p = mean.defined() ? ptr<const S>(mean) : nullptr;
  if (dx.defined() && r.n > 0) {
    norm_backward_dx_kernel<T, S><<<static_cast<unsigned>(r.n), row_threads(r.c), 0, stream>>>(
        ptr<const T>(dy), ptr<const T>(x), ptr<const T>(w), mean_p, ptr<const S>(rstd), ptr<T>(dx), r.c);
    MF_CUDA_LAUNCH_CHECK();
  }
  if (!dw.defined() && !db.defined()) return;
  // Chunks of rows: about 32 rows each, at most 1024 chunks (the partials stay small).
  int64_t nchunks = std::min<int64_t>(1024, (r.n + 31) / 32);
  const int64_t rows_per_chunk = nchunks == 0 ? 0 : (r.n + nchunks - 1) / nchunks;
  if (nchunks > 0) nchunks = (r.n + rows_per_chunk - 1) / rows_per_chunk;
  const DType acc_dtype = sizeof(A) == 8 ? DType::kF64 : DType::kF32;
  Tensor partial = empty({std::max<int64_t>(nchunks, 1), 2, r.c}, acc_dtype, x.device());  // scratch
  if (nchunks > 0) {
    constexpr unsigned kThreads = 128;
    dim3 grid(static_cast<unsigned>((r.c + kThreads - 1) / kThreads), static_cast<unsigned>(nchunks));
    norm_backward_partial_kernel<T, S><<<grid, kThreads, 0, stream>>>(ptr<const T>(dy), ptr<const T>(x), mean_p,
                                                                       ptr<const S>(rstd), ptr<A>(partial), r.n, r.c,
                                                                       rows_per_chunk);
    MF_CUDA_LAUNCH_CHECK();
  }
  norm_backward_params_kernel<T><<<grid_for(r.c), 256, 0, stream>>>(
      ptr<const A>(partial), nchunks, r.c, dw.defined() ? ptr<T>(dw) : nullptr, db.defined() ? ptr<T>(db) : nullptr);
  MF_CUDA_LAUNCH_CHECK();
  // `partial` is freed here; the caching allocator reuses it only after the work queued on the
  // compute stream.
}

// The stats dtype S: x's dtype, or f32 for half x. Calls f.template operator()<S>().
template <DType D, class F>
void with_stats_type(const char* op, const Tensor& stats, F&& f) {
  using T = typename DeviceTypeOf<D>::type;
  if (stats.dtype() == D) return f.template operator()<T>();
  if constexpr (D == DType::kBF16 || D == DType::kF16) {
    if (stats.dtype() == DType::kF32) return f.template operator()<float>();
  }
  MF_THROW(op, ": statistics ", stats.str(), " must be ", dtype_name(D),
           D == DType::kBF16 || D == DType::kF16 ? " or f32" : "");
}

// ---- kernels (signatures in ops/kernels.h)

template <DType D>
void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "layer_norm (cuda)";
  const Rows r = rows_of(kOp, x);
  check_tensor(kOp, "x", x, D, x.shape());
  check_tensor(kOp, "weight", w, D, {r.c});
  if (b.defined()) check_tensor(kOp, "bias", b, D, {r.c});
  check_tensor(kOp, "y", y, D, x.shape());
  MF_CHECK(mean.defined() && rstd.defined(), kOp, ": mean and rstd must be defined");
  check_tensor(kOp, "mean", mean, mean.dtype(), rows_shape(x));
  check_tensor(kOp, "rstd", rstd, mean.dtype(), rows_shape(x));
  with_stats_type<D>(kOp, mean, [&]<class S>() { launch_forward<T, S>(x, w, b, eps, y, mean, rstd, r, false); });
}

template <DType D>
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dw, const Tensor& db) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "layer_norm_backward (cuda)";
  const Rows r = rows_of(kOp, x);
  check_tensor(kOp, "x", x, D, x.shape());
  check_tensor(kOp, "dy", dy, D, x.shape());
  check_tensor(kOp, "weight", w, D, {r.c});
  MF_CHECK(mean.defined() && rstd.defined(), kOp, ": mean and rstd must be defined");
  check_tensor(kOp, "mean", mean, mean.dtype(), rows_shape(x));
  check_tensor(kOp, "rstd", rstd, mean.dtype(), rows_shape(x));
  if (dx.defined()) check_tensor(kOp, "dx", dx, D, x.shape());
  if (dw.defined()) check_tensor(kOp, "dweight", dw, D, {r.c});
  if (db.defined()) check_tensor(kOp, "dbias", db, D, {r.c});
  with_stats_type<D>(kOp, mean, [&]<class S>() { launch_backward<T, S>(dy, x, w, mean, rstd, dx, dw, db, r); });
}

template <DType D>
void rms_norm_forward(const Tensor& x, const Tensor& w, double eps, const Tensor& y, const Tensor& rstd) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "rms_norm (cuda)";
  const Rows r = rows_of(kOp, x);
  check_tensor(kOp, "x", x, D, x.shape());
  check_tensor(kOp, "weight", w, D, {r.c});
  check_tensor(kOp, "y", y, D, x.shape());
  MF_CHECK(rstd.defined(), kOp, ": rstd must be defined");
  check_tensor(kOp, "rstd", rstd, rstd.dtype(), rows_shape(x));
  with_stats_type<D>(kOp, rstd,
                     [&]<class S>() { launch_forward<T, S>(x, w, Tensor(), eps, y, Tensor(), rstd, r, true); });
}

template <DType D>
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dx,
                       const Tensor& dw) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "rms_norm_backward (cuda)";
  const Rows r = rows_of(kOp, x);
  check_tensor(kOp, "x", x, D, x.shape());
  check_tensor(kOp, "dy", dy, D, x.shape());
  check_tensor(kOp, "weight", w, D, {r.c});
  MF_CHECK(rstd.defined(), kOp, ": rstd must be defined");
  check_tensor(kOp, "rstd", rstd, rstd.dtype(), rows_shape(x));
  if (dx.defined()) check_tensor(kOp, "dx", dx, D, x.shape());
  if (dw.defined()) check_tensor(kOp, "dweight", dw, D, {r.c});
  with_stats_type<D>(kOp, rstd,
                     [&]<class S>() { launch_backward<T, S>(dy, x, w, Tensor(), rstd, dx, dw, Tensor(), r); });
}

template <DType D>
void register_dtype(KernelRegistry& r) {
  r.add<kernels::LayerNormForward>("layer_norm", DeviceType::kCUDA, D, layer_norm_forward<D>);
  r.add<kernels::LayerNormBackward>("layer_norm_backward", DeviceType::kCUDA, D, layer_norm_backward<D>);
  r.add<kernels::RmsNormForward>("rms_norm", DeviceType::kCUDA, D, rms_norm_forward<D>);
  r.add<kernels::RmsNormBackward>("rms_norm_backward", DeviceType::kCUDA, D, rms_norm_backward<D>);
}

}  // namespace

void register_norm(KernelRegistry& r) {
  register_dtype<DType::kF32>(r);
  register_dtype<DType::kF64>(r);
  register_dtype<DType::kBF16>(r);
  register_dtype<DType::kF16>(r);
}

}  // namespace mf::cuda
