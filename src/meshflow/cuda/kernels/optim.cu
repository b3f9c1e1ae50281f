// CUDA kernels: fused optimizer updates (AdamW, SGD), in place on contiguous tensors, and the
// multi-tensor AdamW: one launch over a device-side table of (tensor, chunk) entries. f32 and
// f64 compute in their type with the CPU's arithmetic (ops/cpu/optim.cpp) term by term; bf16 /
// f16 in f32, rounding each stored value. adamw_update and adamw_multi share adamw_element, so
// they agree bit for bit.
#include <cmath>
#include <cstring>
#include <vector>

#include "meshflow/cuda/kernels/device_math.cuh"
#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

// The per-step constants of AdamW, in the compute type A (the CPU's T).
template <class A>
struct AdamWConst {
  A b1, b2, one_minus_b1, one_minus_b2, eps, step_size, inv_sqrt_bc2;
};
template <class A>
AdamWConst<A> adamw_const(const kernels::AdamWParams& a) {
  AdamWConst<A> c;
  c.b1 = static_cast<A>(a.beta1);
  c.b2 = static_cast<A>(a.beta2);
  c.one_minus_b1 = A(1) - c.b1;
  c.one_minus_b2 = A(1) - c.b2;
  c.eps = static_cast<A>(a.eps);
  c.step_size = static_cast<A>(a.lr / a.bias_correction1);
  c.inv_sqrt_bc2 = static_cast<A>(1.0 / std::sqrt(a.bias_correction2));
  return c;
}
template <class A>
A adamw_decay(const kernels::AdamWParams& a, double weight_decay) {
  return static_cast<A>(1.0 - a.lr * weight_decay);
}

// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g; p = p decay - step_size m / (sqrt(v) / sqrt(bc2) + eps)
template <class T>
__device__ __forceinline__ void adamw_element(T* p, const T* g, T* m, T* v, int64_t i, const AdamWConst<Acc<T>>& c,
                                              Acc<T> decay) {
  using A = Acc<T>;
  const A gi = to_acc(g[i]);
  const A mi = c.b1 * to_acc(m[i]) + c.one_minus_b1 * gi;
  const A vi = c.b2 * to_acc(v[i]) + c.one_minus_b2 * gi * gi;
  m[i] = from_acc<T>(mi);
  v[i] = from_acc<T>(vi);
  p[i] = from_acc<T>(to_acc(p[i]) * decay - c.step_size * mi / (dev_sqrt(vi) * c.inv_sqrt_bc2 + c.eps));
}

template <class T>
__global__ void adamw_kernel_dev(T* p, const T* g, T* m, T* v, int64_t n, AdamWConst<Acc<T>> c, Acc<T> decay) {
  MF_GRID_STRIDE(i, n) adamw_element(p, g, m, v, i, c, decay);
}

void check_state(const Tensor& t, const Tensor& param, DType dt, const char* name, const char* what) {
  check_dtype(t, dt, name, what);
  check_same_device(t, param, name, what);
  MF_CHECK(t.shape() == param.shape() && t.is_contiguous(), name, ": ", what, " ", t.str(),
           " must be contiguous and shaped like the parameter ", param.str());
}

// param, grad, exp_avg, exp_avg_sq: same shape, contiguous.
template <class T>
void adamw_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const kernels::AdamWParams& a) {
  using A = Acc<T>;
  const char* name = "adamw_update (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(param, dt, name, "param");
  check_contiguous(param, name, "param");
  check_state(grad, param, dt, name, "grad");
  check_state(exp_avg, param, dt, name, "exp_avg");
  check_state(exp_avg_sq, param, dt, name, "exp_avg_sq");
  const int64_t n = param.numel();
  if (n == 0) return;
  adamw_kernel_dev<T><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<T>(param), ptr<const T>(grad), ptr<T>(exp_avg), ptr<T>(exp_avg_sq), n, adamw_const<A>(a),
      adamw_decay<A>(a, a.weight_decay));
  MF_CUDA_LAUNCH_CHECK();
}

// ---- multi-tensor AdamW
template <class T>
struct MultiEntry {
  T* p;
  const T* g;
  T* m;
  T* v;
  int64_t numel;
  Acc<T> decay;
};
struct MultiChunk {
  int64_t tensor;  // entry index
  int64_t start;   // first element of the chunk
};
constexpr int64_t kMultiChunk = 1 << 16;  // elements per block
constexpr int kMultiThreads = 256;

template <class T>
__global__ void __launch_bounds__(kMultiThreads) adamw_multi_kernel(const MultiEntry<T>* entries,
                                                                    const MultiChunk* chunks, AdamWConst<Acc<T>> c) {
  const MultiChunk ch = chunks[blockIdx.x];
  const MultiEntry<T> e = entries[ch.tensor];
  const int64_t end = min(e.numel, ch.start + kMultiChunk);
  for (int64_t i = ch.start + threadIdx.x; i < end; i += kMultiThreads) adamw_element(e.p, e.g, e.m, e.v, i, c, e.decay);
}

template <class T>
void adamw_multi_kernel_host(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                             const std::vector<double>& weight_decays, const kernels::AdamWParams& a) {
  using A = Acc<T>;
  const char* name = "adamw_multi (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  const size_t nt = params.size();
  MF_CHECK(grads.size() == nt && exp_avgs.size() == nt && exp_avg_sqs.size() == nt && weight_decays.size() == nt, name,
           ": ", nt, " params with ", grads.size(), " grads, ", exp_avgs.size(), " exp_avg, ", exp_avg_sqs.size(),
           " exp_avg_sq and ", weight_decays.size(), " weight decays");
  if (nt == 0) return;
  std::vector<MultiEntry<T>> entries;
  std::vector<MultiChunk> chunks;
  entries.reserve(nt);
  for (size_t i = 0; i < nt; ++i) {
    const Tensor& p = params[i];
    check_dtype(p, dt, name, "param");
    check_same_device(p, params[0], name, "param");
    check_contiguous(p, name, "param");
    check_state(grads[i], p, dt, name, "grad");
    check_state(exp_avgs[i], p, dt, name, "exp_avg");
    check_state(exp_avg_sqs[i], p, dt, name, "exp_avg_sq");
    const int64_t n = p.numel();
    if (n == 0) continue;
    const int64_t e = static_cast<int64_t>(entries.size());
    entries.push_back({ptr<T>(p), ptr<const T>(grads[i]), ptr<T>(exp_avgs[i]), ptr<T>(exp_avg_sqs[i]), n,
                       adamw_decay<A>(a, weight_decays[i])});
    for (int64_t s = 0; s < n; s += kMultiChunk) chunks.push_back({e, s});
  }
  if (chunks.empty()) return;
  MF_CHECK(chunks.size() <= static_cast<size_t>(INT32_MAX), name, ": too many chunks (", chunks.size(), ")");
  // One device buffer: the entries, then the chunks (16-byte aligned).
  const size_t entries_bytes = (entries.size() * sizeof(MultiEntry<T>) + 15) / 16 * 16;
  const size_t chunks_bytes = chunks.size() * sizeof(MultiChunk);
  std::vector<unsigned char> table(entries_bytes + chunks_bytes, 0);
  std::memcpy(table.data(), entries.data(), entries.size() * sizeof(MultiEntry<T>));
  std::memcpy(table.data() + entries_bytes, chunks.data(), chunks_bytes);
  Tensor dtable = empty({static_cast<int64_t>((table.size() + 7) / 8)}, DType::kI64, params[0].device());
  copy_host_to_device(dtable.raw_data(), table.data(), table.size());
  const auto* dentries = reinterpret_cast<const MultiEntry<T>*>(dtable.raw_data());
  const auto* dchunks = reinterpret_cast<const MultiChunk*>(static_cast<const unsigned char*>(dtable.raw_data()) +
                                                            entries_bytes);
  adamw_multi_kernel<T><<<static_cast<unsigned>(chunks.size()), kMultiThreads, 0, compute_stream()>>>(
      dentries, dchunks, adamw_const<A>(a));
  MF_CUDA_LAUNCH_CHECK();
  // dtable is freed stream-ordered after the kernel.
}

// ---- SGD: buf = momentum buf + (g + wd p); p -= lr buf   (no buf when momentum == 0)
template <class T>
__global__ void sgd_kernel_dev(T* p, const T* g, T* buf, int64_t n, Acc<T> lr, Acc<T> mom, Acc<T> wd) {
  using A = Acc<T>;
  MF_GRID_STRIDE(i, n) {
    const A pi = to_acc(p[i]), gi = to_acc(g[i]);
    if (buf) {
      const A b = mom * to_acc(buf[i]) + gi + wd * pi;
      buf[i] = from_acc<T>(b);
      p[i] = from_acc<T>(pi - lr * b);
    } else {
      p[i] = from_acc<T>(pi - lr * (gi + wd * pi));
    }
  }
}

template <class T>
void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, double lr, double momentum,
                double weight_decay) {
  using A = Acc<T>;
  const char* name = "sgd_update (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(param, dt, name, "param");
  check_contiguous(param, name, "param");
  check_state(grad, param, dt, name, "grad");
  if (momentum != 0.0) check_state(momentum_buf, param, dt, name, "momentum_buf");
  const int64_t n = param.numel();
  if (n == 0) return;
  T* buf = momentum != 0.0 ? ptr<T>(momentum_buf) : nullptr;
  sgd_kernel_dev<T><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<T>(param), ptr<const T>(grad), buf, n, static_cast<A>(lr), static_cast<A>(momentum),
      static_cast<A>(weight_decay));
  MF_CUDA_LAUNCH_CHECK();
}

template <class T>
void register_for(KernelRegistry& r) {
  constexpr DType D = dtype_of_device<T>();
  r.add<kernels::AdamWUpdate>("adamw_update", DeviceType::kCUDA, D, adamw_kernel<T>);
  r.add<kernels::AdamWMulti>("adamw_multi", DeviceType::kCUDA, D, adamw_multi_kernel_host<T>);
  r.add<kernels::SgdUpdate>("sgd_update", DeviceType::kCUDA, D, sgd_kernel<T>);
}

}  // namespace

void register_optim(KernelRegistry& r) {
  register_for<float>(r);
  register_for<double>(r);
  register_for<__nv_bfloat16>(r);
  register_for<__half>(r);
}

}  // namespace mf::cuda
