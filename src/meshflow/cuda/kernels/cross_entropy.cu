// CUDA kernels: fused softmax + cross-entropy over rows of logits (f32, f64, bf16, f16; half
// logits computed in f32). The same formulas as ops/cpu/cross_entropy.cpp.
//
// Forward: one block per row, one read of the logits: each thread keeps an online softmax
// (running max m, sum of exp(x - m)) and the sum of the logits; the block then rescales to the
// row max and sums. Writes the row's lse and loss (label smoothing, ignore_index); the
// probabilities are never stored.
// Backward: one block per row: dlogits = grad_scale * (exp(x - lse) - target distribution), one
// read of the logits and one write. A target >= V (vocab_parallel_cross_entropy: the target
// column is in another rank's shard) has no one-hot term.
// loss/lse have the dtype of the logits, or f32 for bf16/f16 logits (whichever the op allocates).
#include <utility>

#include "meshflow/cuda/kernels/common.cuh"

namespace mf::cuda {
namespace {

constexpr unsigned kThreads = 512;  // per row block

__device__ __forceinline__ float acc_exp(float x) { return expf(x); }
__device__ __forceinline__ double acc_exp(double x) { return exp(x); }
__device__ __forceinline__ float acc_log(float x) { return logf(x); }
__device__ __forceinline__ double acc_log(double x) { return log(x); }

// logits (N,V), targets (N) -> loss (N), lse (N). grid N, block kThreads.
template <class T, class S>
__global__ void cross_entropy_forward_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                             int64_t V, int64_t ignore_index, double smoothing, S* __restrict__ loss,
                                             S* __restrict__ lse) {
  using A = Acc<T>;
  __shared__ A shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = logits + row * V;
  A m = -INFINITY, s = 0, sx = 0;  // running max, sum of exp(x - m), sum of x
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    const A v = to_acc(xr[c]);
    sx += v;
    if (v > m) {
      s = s * acc_exp(m - v) + A(1);  // m = -inf at first: s is 0, exp(-inf) = 0
      m = v;
    } else if (!(v == -INFINITY)) {  // exp(-inf - m) is 0 (and -inf - -inf would be NaN); NaN propagates
      s += acc_exp(v - m);
    }
  }
  const A row_max = block_max(m, shared);
  const A s_scaled = (m == -INFINITY) ? A(0) : s * acc_exp(m - row_max);
  const A sum_e = block_sum(s_scaled, shared);
  const A sum_x = block_sum(sx, shared);
  if (threadIdx.x != 0) return;
  const A l = row_max + acc_log(sum_e);
  lse[row] = from_acc<S>(l);
  const int64_t t = targets[row];
  if (t == ignore_index) {
    loss[row] = from_acc<S>(A(0));
    return;
  }
  if (t < 0 || t >= V) {  // the op range-checks targets; never read outside the row
    loss[row] = from_acc<S>(static_cast<A>(NAN));
    return;
  }
  // -sum_j target_j log softmax_j with target = (1 - eps) onehot + eps / V, in f64 like the CPU
  const double nll = static_cast<double>(l) - static_cast<double>(to_acc(xr[t]));
  const double smooth = static_cast<double>(l) - static_cast<double>(sum_x) / static_cast<double>(V);
  loss[row] = from_acc<S>(static_cast<A>((1.0 - smoothing) * nll + smoothing * smooth));
}

// dlogits (N,V) = grad_scale * softmax - grad_scale * smoothing / V, minus grad_scale *
// (1 - smoothing) at the target column (when 0 <= target < V); 0 for ignored rows. grid N.
template <class T, class S>
__global__ void cross_entropy_backward_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                                              const S* __restrict__ lse, int64_t V, int64_t ignore_index,
                                              double smoothing, double grad_scale, T* __restrict__ dlogits) {
  using A = Acc<T>;
  const int64_t row = blockIdx.x;
  const T* xr = logits + row * V;
  T* dr = dlogits + row * V;
  const int64_t t = targets[row];
  if (t == ignore_index || grad_scale == 0.0) {
    for (int64_t c = threadIdx.x; c < V; c += blockDim.x) dr[c] = from_acc<T>(A(0));
    return;
  }
  const A l = static_cast<A>(to_acc(lse[row]));
  const A gs = static_cast<A>(grad_scale);
  const A uni = static_cast<A>(grad_scale * smoothing / static_cast<double>(V));
  const A onehot = static_cast<A>(grad_scale * (1.0 - smoothing));
  for (int64_t c = threadIdx.x; c < V; c += blockDim.x) {
    A d = gs * acc_exp(to_acc(xr[c]) - l) - uni;
    if (c == t) d -= onehot;  // never for t >= V (another shard's column)
    dr[c] = from_acc<T>(d);
  }
}

// ---- host side

void check_tensor(const char* op, const char* what, const Tensor& t, DType dtype, const Shape& shape) {
  MF_CHECK(t.defined(), op, ": ", what, " is undefined");
  MF_CHECK(t.device().type == DeviceType::kCUDA, op, ": ", what, " ", t.str(), " is not on a CUDA device");
  MF_CHECK(t.dtype() == dtype, op, ": ", what, " ", t.str(), " must be ", dtype_name(dtype));
  MF_CHECK(t.shape() == shape, op, ": ", what, " ", t.str(), " has the wrong shape (expected ", shape_str(shape), ")");
  MF_CHECK(t.is_contiguous(), op, ": ", what, " ", t.str(), " must be contiguous");
}

// logits (N, V) of dtype D on a CUDA device, targets (N) i64; returns {N, V}.
template <DType D>
std::pair<int64_t, int64_t> check_rows(const char* op, const Tensor& logits, const Tensor& targets) {
  MF_CHECK(logits.defined() && logits.ndim() == 2, op, ": logits must be (N, V)");
  const int64_t N = logits.shape(0), V = logits.shape(1);
  check_tensor(op, "logits", logits, D, {N, V});
  check_tensor(op, "targets", targets, DType::kI64, {N});
  MF_CHECK(N <= 0x7fffffff, op, ": logits ", logits.str(), " have more than 2^31-1 rows");
  MF_CHECK(V > 0 || N == 0, op, ": logits ", logits.str(), " have no classes");
  return {N, V};
}

// The dtype S of loss/lse: the logits' dtype, or f32 for half logits. Calls f.template operator()<S>().
template <DType D, class F>
void with_stats_type(const char* op, const Tensor& stats, F&& f) {
  using T = typename DeviceTypeOf<D>::type;
  if (stats.dtype() == D) return f.template operator()<T>();
  if constexpr (D == DType::kBF16 || D == DType::kF16) {
    if (stats.dtype() == DType::kF32) return f.template operator()<float>();
  }
  MF_THROW(op, ": ", stats.str(), " must be ", dtype_name(D), D == DType::kBF16 || D == DType::kF16 ? " or f32" : "");
}

template <DType D>
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double smoothing,
                           const Tensor& loss, const Tensor& lse) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "cross_entropy_forward (cuda)";
  const std::pair<int64_t, int64_t> rows = check_rows<D>(kOp, logits, targets);
  const int64_t N = rows.first, V = rows.second;
  MF_CHECK(loss.defined() && lse.defined(), kOp, ": loss and lse must be defined");
  check_tensor(kOp, "loss", loss, lse.dtype(), {N});
  check_tensor(kOp, "lse", lse, lse.dtype(), {N});
  if (N == 0) return;
  with_stats_type<D>(kOp, lse, [&]<class S>() {
    cross_entropy_forward_kernel<T, S><<<static_cast<unsigned>(N), kThreads, 0, compute_stream()>>>(
        ptr<const T>(logits), ptr<const int64_t>(targets), V, ignore_index, smoothing, ptr<S>(loss), ptr<S>(lse));
    MF_CUDA_LAUNCH_CHECK();
  });
}

template <DType D>
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, int64_t ignore_index,
                            double smoothing, double grad_scale, const Tensor& dlogits) {
  using T = typename DeviceTypeOf<D>::type;
  constexpr const char* kOp = "cross_entropy_backward (cuda)";
  const std::pair<int64_t, int64_t> rows = check_rows<D>(kOp, logits, targets);
  const int64_t N = rows.first, V = rows.second;
  MF_CHECK(lse.defined(), kOp, ": lse must be defined");
  check_tensor(kOp, "lse", lse, lse.dtype(), {N});
  check_tensor(kOp, "dlogits", dlogits, D, {N, V});
  if (N == 0) return;
  with_stats_type<D>(kOp, lse, [&]<class S>() {
    cross_entropy_backward_kernel<T, S><<<static_cast<unsigned>(N), kThreads, 0, compute_stream()>>>(
        ptr<const T>(logits), ptr<const int64_t>(targets), ptr<const S>(lse), V, ignore_index, smoothing, grad_scale,
        ptr<T>(dlogits));
    MF_CUDA_LAUNCH_CHECK();
  });
}

template <DType D>
void register_dtype(KernelRegistry& r) {
  r.add<kernels::CrossEntropyForward>("cross_entropy_forward", DeviceType::kCUDA, D, cross_entropy_forward<D>);
  r.add<kernels::CrossEntropyBackward>("cross_entropy_backward", DeviceType::kCUDA, D, cross_entropy_backward<D>);
}

}  // namespace

void register_cross_entropy(KernelRegistry& r) {
  register_dtype<DType::kF32>(r);
  register_dtype<DType::kF64>(r);
  register_dtype<DType::kBF16>(r);
  register_dtype<DType::kF16>(r);
}

}  // namespace mf::cuda
