// CUDA kernels "attention_forward" / "attention_backward" (flash attention) for f32, f64, bf16
// and f16: the host side. Checks every operand (shape, dtype, device, strides), picks the tile
// configuration, sizes shared memory and launches the kernels of attention_forward.cuh and
// attention_backward.cuh on the compute stream. Semantics are those of ops/cpu/attention.cpp:
// causal = key j visible to query i iff j <= i (Tq == Tk); a padding-masked key is invisible; a
// row that sees no key gives out = 0 and lse = -inf; dropout keeps score (b, h, i, j) by the
// same Philox number as the CPU and scales kept probabilities by 1 / (1 - p).
//
// Configurations: head dim D <= 64 runs the kDP = 64 kernels, D <= 128 the kDP = 128 ones (the
// padding columns are zeros). bf16/f16 use 4 warps (64 x 64 tiles, tensor cores), f32 2 warps
// (32 x 32 tiles, FMAs in f32), f64 1 warp (16 x 16 tiles), which keeps every kernel's shared
// memory within the 163 KiB of an A100 block. lse is f32 or f64 as the inputs, and for
// bf16/f16 inputs either f32 (preferred) or the input dtype; in the latter case the backward
// first recomputes an f32 lse with the forward kernel (one extra forward pass), because a
// rounded lse would bias the recomputed probabilities.
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "meshflow/cuda/kernels/attention_backward.cuh"
#include "meshflow/cuda/kernels/attention_common.cuh"
#include "meshflow/cuda/kernels/attention_forward.cuh"

namespace mf::cuda {
namespace {

using attn::Args;
using attn::Geom;

constexpr const char* kFwd = "attention_forward (cuda)";
constexpr const char* kBwd = "attention_backward (cuda)";

template <class T>
constexpr int warps_for() {
  if constexpr (attn::kTensorCore<T>) return 4;
  else if constexpr (std::is_same_v<T, float>) return 2;
  else return 1;
}

Geom geom_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// t must be (B, H, T, D) of dtype dt on `dev`, last axis contiguous, other strides >= 0.
void check_operand(const char* op, const char* name, const Tensor& t, int64_t B, int64_t H, int64_t T, int64_t D,
                   DType dt, const Device& dev) {
  MF_CHECK(t.defined(), op, ": ", name, " is undefined");
  MF_CHECK(t.ndim() == 4 && t.shape(0) == B && t.shape(1) == H && t.shape(2) == T && t.shape(3) == D, op, ": ", name,
           " ", t.str(), " must have shape (", B, ", ", H, ", ", T, ", ", D, ")");
  MF_CHECK(t.dtype() == dt, op, ": ", name, " ", t.str(), " must have dtype ", dtype_name(dt));
  MF_CHECK(t.device() == dev, op, ": ", name, " ", t.str(), " is not on ", dev.str());
  MF_CHECK(t.stride(3) == 1 || D == 1, op, ": ", name, " ", t.str(), " must have a contiguous last axis (stride ",
           t.stride(3), ")");
  MF_CHECK(t.stride(0) >= 0 && t.stride(1) >= 0 && t.stride(2) >= 0, op, ": ", name, " ", t.str(),
           " has a negative stride");
}

// Whether the 16-byte tile loads may read t: data, strides and D in whole 16-byte chunks.
bool vec_ok(const Tensor& t, int64_t D) {
  const int64_t v = static_cast<int64_t>(16 / dtype_nbytes(t.dtype()));
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 && D % v == 0 && t.stride(0) % v == 0 &&
         t.stride(1) % v == 0 && t.stride(2) % v == 0;
}

// The opt-in shared memory per block of the current device (cached per device).
int64_t max_smem_per_block() {
  static std::mutex mu;
  static std::vector<int> cache;
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= dev) cache.resize(dev + 1, -1);
  if (cache[dev] < 0) {
    int v = 0;
    MF_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cache[dev] = v;
  }
  return cache[dev];
}

// Allows `kernel` nbytes of dynamic shared memory, or throws naming the configuration.
template <class K>
void allow_smem(K kernel, int64_t nbytes, const char* op, int kdp, int warps) {
  const int64_t limit = max_smem_per_block();
  MF_CHECK(nbytes <= limit, op, ": the kDP=", kdp, ", ", warps, "-warp configuration needs ", nbytes,
           " bytes of shared memory per block, the device allows ", limit);
  MF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(nbytes)));
}

dim3 grid_of(const char* op, int64_t BH, int64_t tiles) {
  MF_CHECK(BH <= std::numeric_limits<int32_t>::max(), op, ": B * H = ", BH, " exceeds the grid");
  MF_CHECK(tiles <= 65535, op, ": ", tiles, " tiles along the sequence exceed the grid (65535)");
  return dim3(static_cast<unsigned>(BH), static_cast<unsigned>(tiles), 1);
}

// Fills the shape, mask and dropout fields of the launch arguments (common to both passes).
Args make_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& mask, const kernels::AttentionParams& p) {
  Args a;
  a.B = q.shape(0);
  a.H = q.shape(1);
  a.Tq = q.shape(2);
  a.D = q.shape(3);
  a.Tk = k.shape(2);
  MF_CHECK(a.D >= 1 && a.D <= 128, op, ": head dim ", a.D, " of q ", q.str(), " is not in [1, 128]");
  MF_CHECK(a.Tk >= 1, op, ": k ", k.str(), " has no keys");
  MF_CHECK(!p.causal || a.Tq == a.Tk, op, ": causal attention needs Tq == Tk, got q ", q.str(), ", k ", k.str());
  MF_CHECK(p.window == 0, op, ": sliding-window attention (window ", p.window, ") is not implemented on CUDA yet");
  MF_CHECK(std::isfinite(p.scale), op, ": scale ", p.scale, " is not finite");
  a.causal = p.causal;
  a.scale = p.scale;
  if (mask.defined()) {
    MF_CHECK(mask.dtype() == DType::kBool && mask.ndim() == 2 && mask.shape(0) == a.B && mask.shape(1) == a.Tk &&
                 mask.is_contiguous(),
             op, ": mask ", mask.str(), " must be a contiguous bool (", a.B, ", ", a.Tk, ")");
    MF_CHECK(mask.device() == q.device(), op, ": mask ", mask.str(), " is not on ", q.device().str());
    static_assert(sizeof(bool) == 1, "bool masks are read as bytes");
    a.mask = static_cast<const uint8_t*>(mask.raw_data());
  }
  MF_CHECK(p.dropout_p >= 0.0 && p.dropout_p < 1.0, op, ": dropout_p ", p.dropout_p, " is not in [0, 1)");
  if (p.dropout_p > 0.0) {
    a.dropout = true;
    a.keep_threshold = attn::keep_threshold_of(p.dropout_p);
    a.keep_scale = 1.0 / (1.0 - p.dropout_p);
    a.seed = p.seed;
    a.stream = p.stream;
    a.dropout_offset = p.dropout_offset;
    a.logical_heads = p.logical_heads > 0 ? p.logical_heads : a.H;
    a.head_offset = p.head_offset;
    MF_CHECK(a.head_offset >= 0 && a.head_offset + a.H <= a.logical_heads, op, ": heads [", a.head_offset, ", ",
             a.head_offset + a.H, ") do not fit in logical_heads ", a.logical_heads);
  }
  return a;
}

void check_lse(const char* op, const Tensor& lse, const Tensor& q) {
  MF_CHECK(lse.defined() && lse.ndim() == 3 && lse.shape(0) == q.shape(0) && lse.shape(1) == q.shape(1) &&
               lse.shape(2) == q.shape(2) && lse.is_contiguous(),
           op, ": lse ", (lse.defined() ? lse.str() : std::string("undefined")), " must be contiguous (B, H, Tq) for q ",
           q.str());
  MF_CHECK(lse.device() == q.device(), op, ": lse ", lse.str(), " is not on ", q.device().str());
}

// ---- forward

template <class T, class L, int kDP>
void launch_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                    const Args& a) {
  constexpr int kW = warps_for<T>();
  using S = attn::ForwardSmem<T, kDP, kW>;
  const int64_t nbytes = S::bytes();
  auto kernel = attn::attention_forward_kernel<T, L, kDP, kW>;
  allow_smem(kernel, nbytes, kFwd, kDP, kW);
  const dim3 grid = grid_of(kFwd, a.B * a.H, (a.Tq + S::kBM - 1) / S::kBM);
  const bool vec_q = vec_ok(q, a.D), vec_kv = vec_ok(k, a.D) && vec_ok(v, a.D);
  kernel<<<grid, kW * 32, nbytes, compute_stream()>>>(ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(out), ptr<L>(lse), a,
                                                      geom_of(q), geom_of(k), geom_of(v), geom_of(out), vec_q, vec_kv);
  MF_CUDA_LAUNCH_CHECK();
}

// q (B,H,Tq,D), k/v (B,H,Tk,D), out (B,H,Tq,D) strided with a contiguous last axis; mask
// (B,Tk) bool or undefined; lse (B,H,Tq) contiguous, dtype L.
template <DType DT, class L>
void forward_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                  const kernels::AttentionParams& p, const Tensor& out, const Tensor& lse) {
  using T = typename DeviceTypeOf<DT>::type;
  MF_CHECK(q.defined() && q.ndim() == 4 && k.defined() && k.ndim() == 4, kFwd, ": q and k must be rank 4 (B, H, T, D)");
  const int64_t B = q.shape(0), H = q.shape(1), Tq = q.shape(2), D = q.shape(3), Tk = k.shape(2);
  const Device dev = q.device();
  MF_CHECK(dev.type == DeviceType::kCUDA, kFwd, ": q ", q.str(), " is not on a CUDA device");
  MF_CHECK(dev.index == current_device(), kFwd, ": q ", q.str(), " is not on the current device cuda:", current_device());
  check_operand(kFwd, "q", q, B, H, Tq, D, DT, dev);
  check_operand(kFwd, "k", k, B, H, Tk, D, DT, dev);
  check_operand(kFwd, "v", v, B, H, Tk, D, DT, dev);
  check_operand(kFwd, "out", out, B, H, Tq, D, DT, dev);
  check_lse(kFwd, lse, q);
  const Args a = make_args(kFwd, q, k, mask, p);
  if (B * H * Tq == 0) return;
  if (D <= 64) launch_forward<T, L, 64>(q, k, v, out, lse, a);
  else launch_forward<T, L, 128>(q, k, v, out, lse, a);
}

// ---- backward

template <class T, class L, int kDP>
void launch_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                     const Tensor& lse, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Args& a) {
  using A = Acc<T>;
  constexpr int kW = warps_for<T>();
  using S = attn::BackwardSmem<T, kDP, kW>;
  const int64_t nbytes = S::bytes();
  const bool vec_q = vec_ok(q, a.D) && vec_ok(dout, a.D), vec_kv = vec_ok(k, a.D) && vec_ok(v, a.D);
  const int64_t BH = a.B * a.H, nrows = BH * a.Tq;

  // Di = rowsum(dO * O): (B * H * Tq) in Acc<T>, stream-ordered scratch.
  Tensor di = empty({std::max<int64_t>(nrows, 1)}, std::is_same_v<A, double> ? DType::kF64 : DType::kF32, q.device());
  if (nrows > 0) {
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>((nrows + kThreads / 32 - 1) / (kThreads / 32),
                                             static_cast<int64_t>(multiprocessor_count()) * 32);
    attn::attention_rowdot_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, compute_stream()>>>(
        ptr<T>(dout), ptr<T>(out), ptr<A>(di), a, geom_of(dout), geom_of(out));
    MF_CUDA_LAUNCH_CHECK();
  }

  // dK, dV: one block per key tile (also when Tq == 0: the tiles are then written as zeros).
  auto dkdv = attn::attention_dkdv_kernel<T, L, kDP, kW>;
  allow_smem(dkdv, nbytes, kBwd, kDP, kW);
  const dim3 grid_kv = grid_of(kBwd, BH, (a.Tk + S::kBN - 1) / S::kBN);
  dkdv<<<grid_kv, kW * 32, nbytes, compute_stream()>>>(ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(dout), ptr<L>(lse),
                                                       ptr<A>(di), ptr<T>(dk), ptr<T>(dv), a, geom_of(q), geom_of(k),
                                                       geom_of(v), geom_of(dout), geom_of(dk), geom_of(dv), vec_q,
                                                       vec_kv);
  MF_CUDA_LAUNCH_CHECK();

  // dQ: one block per query tile.
  if (a.Tq > 0) {
    auto dqk = attn::attention_dq_kernel<T, L, kDP, kW>;
    allow_smem(dqk, nbytes, kBwd, kDP, kW);
    const dim3 grid_q = grid_of(kBwd, BH, (a.Tq + S::kBM - 1) / S::kBM);
    dqk<<<grid_q, kW * 32, nbytes, compute_stream()>>>(ptr<T>(q), ptr<T>(k), ptr<T>(v), ptr<T>(dout), ptr<L>(lse),
                                                       ptr<A>(di), ptr<T>(dq), a, geom_of(q), geom_of(k), geom_of(v),
                                                       geom_of(dout), geom_of(dq), vec_q, vec_kv);
    MF_CUDA_LAUNCH_CHECK();
  }
}

// dout/out (B,H,Tq,D), q (B,H,Tq,D), k/v (B,H,Tk,D), lse (B,H,Tq) dtype L; dq/dk/dv like
// q/k/v (strided, written, not accumulated).
template <DType DT, class L>
void backward_impl(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, const Tensor& mask, const kernels::AttentionParams& p, const Tensor& dq,
                   const Tensor& dk, const Tensor& dv) {
  using T = typename DeviceTypeOf<DT>::type;
  MF_CHECK(q.defined() && q.ndim() == 4 && k.defined() && k.ndim() == 4, kBwd, ": q and k must be rank 4 (B, H, T, D)");
  const int64_t B = q.shape(0), H = q.shape(1), Tq = q.shape(2), D = q.shape(3), Tk = k.shape(2);
  const Device dev = q.device();
  MF_CHECK(dev.type == DeviceType::kCUDA, kBwd, ": q ", q.str(), " is not on a CUDA device");
  MF_CHECK(dev.index == current_device(), kBwd, ": q ", q.str(), " is not on the current device cuda:", current_device());
  check_operand(kBwd, "dout", dout, B, H, Tq, D, DT, dev);
  check_operand(kBwd, "q", q, B, H, Tq, D, DT, dev);
  check_operand(kBwd, "k", k, B, H, Tk, D, DT, dev);
  check_operand(kBwd, "v", v, B, H, Tk, D, DT, dev);
  check_operand(kBwd, "out", out, B, H, Tq, D, DT, dev);
  check_operand(kBwd, "dq", dq, B, H, Tq, D, DT, dev);
  check_operand(kBwd, "dk", dk, B, H, Tk, D, DT, dev);
  check_operand(kBwd, "dv", dv, B, H, Tk, D, DT, dev);
  check_lse(kBwd, lse, q);
  const Args a = make_args(kBwd, q, k, mask, p);
  if (B * H == 0) return;
  if constexpr (attn::kTensorCore<T> && !std::is_same_v<L, float>) {
    // lse stored in bf16/f16 (8/11 significant bits) would shift every recomputed probability
    // by up to ~3% (bf16, |lse| ~ 10): recompute it in f32 with the forward kernel (same
    // scores, masks and dropout) into scratch, and run the backward on that.
    Tensor lse32 = empty({B, H, Tq}, DType::kF32, dev);
    Tensor out_scratch = empty({B, H, Tq, D}, DT, dev);
    if (D <= 64) {
      if (Tq > 0) launch_forward<T, float, 64>(q, k, v, out_scratch, lse32, a);
      launch_backward<T, float, 64>(dout, q, k, v, out, lse32, dq, dk, dv, a);
    } else {
      if (Tq > 0) launch_forward<T, float, 128>(q, k, v, out_scratch, lse32, a);
      launch_backward<T, float, 128>(dout, q, k, v, out, lse32, dq, dk, dv, a);
    }
  } else {
    if (D <= 64) launch_backward<T, L, 64>(dout, q, k, v, out, lse, dq, dk, dv, a);
    else launch_backward<T, L, 128>(dout, q, k, v, out, lse, dq, dk, dv, a);
  }
}

// Entry points registered per input dtype: dispatch on the dtype of lse.
template <DType DT>
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const kernels::AttentionParams& p, const Tensor& out, const Tensor& lse) {
  MF_CHECK(lse.defined(), kFwd, ": lse is undefined");
  if constexpr (DT == DType::kF32 || DT == DType::kF64) {
    MF_CHECK(lse.dtype() == DT, kFwd, ": lse ", lse.str(), " must have dtype ", dtype_name(DT));
    forward_impl<DT, typename DeviceTypeOf<DT>::type>(q, k, v, mask, p, out, lse);
  } else {
    MF_CHECK(lse.dtype() == DType::kF32 || lse.dtype() == DT, kFwd, ": lse ", lse.str(), " must be f32 or ",
             dtype_name(DT));
    if (lse.dtype() == DType::kF32) forward_impl<DT, float>(q, k, v, mask, p, out, lse);
    else forward_impl<DT, typename DeviceTypeOf<DT>::type>(q, k, v, mask, p, out, lse);
  }
}

template <DType DT>
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& mask, const kernels::AttentionParams& p, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv) {
  MF_CHECK(lse.defined(), kBwd, ": lse is undefined");
  if constexpr (DT == DType::kF32 || DT == DType::kF64) {
    MF_CHECK(lse.dtype() == DT, kBwd, ": lse ", lse.str(), " must have dtype ", dtype_name(DT));
    backward_impl<DT, typename DeviceTypeOf<DT>::type>(dout, q, k, v, out, lse, mask, p, dq, dk, dv);
  } else {
    MF_CHECK(lse.dtype() == DType::kF32 || lse.dtype() == DT, kBwd, ": lse ", lse.str(), " must be f32 or ",
             dtype_name(DT));
    if (lse.dtype() == DType::kF32) backward_impl<DT, float>(dout, q, k, v, out, lse, mask, p, dq, dk, dv);
    else backward_impl<DT, typename DeviceTypeOf<DT>::type>(dout, q, k, v, out, lse, mask, p, dq, dk, dv);
  }
}

}  // namespace

void register_attention(KernelRegistry& r) {
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCUDA, DType::kF32, attention_forward<DType::kF32>);
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCUDA, DType::kF64, attention_forward<DType::kF64>);
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCUDA, DType::kBF16, attention_forward<DType::kBF16>);
  r.add<kernels::AttentionForward>("attention_forward", DeviceType::kCUDA, DType::kF16, attention_forward<DType::kF16>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCUDA, DType::kF32,
                                    attention_backward<DType::kF32>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCUDA, DType::kF64,
                                    attention_backward<DType::kF64>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCUDA, DType::kBF16,
                                    attention_backward<DType::kBF16>);
  r.add<kernels::AttentionBackward>("attention_backward", DeviceType::kCUDA, DType::kF16,
                                    attention_backward<DType::kF16>);
}

}  // namespace mf::cuda
