// CUDA kernels: softmax and log_softmax over the last axis, forward and backward, one block
// per row (rows are re-read from cache between the passes). f32, f64, bf16, f16 (computed in
// f32). Formulas as ops/cpu/softmax.cpp: a row whose max is -inf is shifted by 0.
#include "meshflow/cuda/kernels/device_math.cuh"
#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

// Threads per row: C rounded up to warps, at most kMaxRowThreads.
constexpr int kMaxRowThreads = 512;
inline int row_threads(int64_t C) {
  int64_t t = (C + 31) / 32 * 32;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(t, 32), kMaxRowThreads));
}

// x (N, C) -> y (N, C); block n = row n.
template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) softmax_fwd_kernel(const T* x, T* y, int64_t C, bool log) {
  using A = Acc<T>;
  __shared__ A shared[32];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * C;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * C;
  A m = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = max(m, to_acc(xr[c]));
  m = block_max(m, shared);
  if (m == A(-INFINITY)) m = A(0);  // all -inf: keep exp finite
  A s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += dev_exp(to_acc(xr[c]) - m);
  s = block_sum(s, shared);
  if (log) {
    const A lse = m + dev_log(s);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = from_acc<T>(to_acc(xr[c]) - lse);
  } else {
    const A inv = A(1) / s;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = from_acc<T>(dev_exp(to_acc(xr[c]) - m) * inv);
  }
}

// dy, y (N, C) -> dx (N, C): softmax dx = y (dy - <dy, y>); log_softmax dx = dy - exp(y) sum(dy)
template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) softmax_bwd_kernel(const T* dy, const T* y, T* dx, int64_t C,
                                                                     bool log) {
  using A = Acc<T>;
  __shared__ A shared[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * C;
  const T* dyr = dy + base;
  const T* yr = y + base;
  T* dxr = dx + base;
  A s = 0;
  if (log) {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += to_acc(dyr[c]);
    s = block_sum(s, shared);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dxr[c] = from_acc<T>(to_acc(dyr[c]) - dev_exp(to_acc(yr[c])) * s);
  } else {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += to_acc(dyr[c]) * to_acc(yr[c]);
    s = block_sum(s, shared);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dxr[c] = from_acc<T>(to_acc(yr[c]) * (to_acc(dyr[c]) - s));
  }
}

// The (N, C) rows of a contiguous tensor; throws when N does not fit a grid.
void rows_of(const Tensor& t, const char* name, int64_t& N, int64_t& C) {
  MF_CHECK(t.ndim() >= 1, name, ": ", t.str(), " has no last axis");
  C = t.shape(-1);
  N = C == 0 ? 0 : t.numel() / C;
  MF_CHECK(N <= INT32_MAX, name, ": ", N, " rows are too many for one grid");
}

template <class T>
void softmax_fwd(const Tensor& x, const Tensor& y, bool log) {
  const char* name = "softmax (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(x, dt, name, "x");
  check_dtype(y, dt, name, "y");
  check_same_device(y, x, name, "y");
  check_contiguous(x, name, "x");
  check_contiguous(y, name, "y");
  MF_CHECK(x.shape() == y.shape(), name, ": x ", x.str(), " and y ", y.str(), " differ in shape");
  int64_t N, C;
  rows_of(x, name, N, C);
  if (N == 0) return;
  softmax_fwd_kernel<T><<<static_cast<unsigned>(N), row_threads(C), 0, compute_stream()>>>(ptr<const T>(x), ptr<T>(y),
                                                                                          C, log);
  MF_CUDA_LAUNCH_CHECK();
}

template <class T>
void softmax_bwd(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  const char* name = "softmax_backward (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(dy, dt, name, "dy");
  check_dtype(y, dt, name, "y");
  check_dtype(dx, dt, name, "dx");
  check_same_device(dy, y, name, "dy");
  check_same_device(dx, y, name, "dx");
  check_contiguous(dy, name, "dy");
  check_contiguous(y, name, "y");
  check_contiguous(dx, name, "dx");
  MF_CHECK(dy.shape() == y.shape() && dx.shape() == y.shape(), name, ": dy ", dy.str(), ", y ", y.str(), " and dx ",
           dx.str(), " differ in shape");
  int64_t N, C;
  rows_of(y, name, N, C);
  if (N == 0) return;
  softmax_bwd_kernel<T><<<static_cast<unsigned>(N), row_threads(C), 0, compute_stream()>>>(
      ptr<const T>(dy), ptr<const T>(y), ptr<T>(dx), C, log);
  MF_CUDA_LAUNCH_CHECK();
}

template <class T>
void register_for(KernelRegistry& r) {
  constexpr DType D = dtype_of_device<T>();
  r.add<kernels::SoftmaxForward>("softmax", DeviceType::kCUDA, D, softmax_fwd<T>);
  r.add<kernels::SoftmaxBackward>("softmax_backward", DeviceType::kCUDA, D, softmax_bwd<T>);
}

}  // namespace

void register_softmax(KernelRegistry& r) {
  register_for<float>(r);
  register_for<double>(r);
  register_for<__nv_bfloat16>(r);
  register_for<__half>(r);
}

}  // namespace mf::cuda
