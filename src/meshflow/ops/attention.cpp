// scaled_dot_product_attention: input checks, kernel dispatch and the autograd record. The
// output lives as a contiguous (B, Tq, H, D) buffer and is returned as its (B, H, Tq, D)
// permuted view, so transpose(out, 1, 2) + reshape to (B, Tq, H * D) needs no copy.
// bf16/f16 q, k, v run natively where both half kernels are registered (CUDA): out and the
// gradients are bf16/f16, the row log-sum-exp (lse) f32 (the compute dtype).
#include <algorithm>
#include <cmath>
#include <vector>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
constexpr const char* kOp = "scaled_dot_product_attention";

// The tensor itself when the kernel can read it in place (last axis contiguous, row stride a
// valid GEMM leading dimension), else a contiguous copy.
Tensor kernel_view(const Tensor& t) {
  bool ok = t.stride(3) == 1 && t.stride(2) >= t.shape(3);
  return ok ? t : contiguous(t);
}

// An uninitialised tensor shaped like t (B, H, T, D) whose dense storage orders the first
// three axes as t's strides do (D innermost): the gradient of q = transpose(x, 1, 2) then
// reaches x as a contiguous tensor.
Tensor empty_like_layout(const Tensor& t) {
  std::vector<int64_t> order = {0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  order.push_back(3);
  Shape stored(4);
  std::vector<int64_t> inverse(4);
  for (int64_t i = 0; i < 4; ++i) {
    stored[i] = t.shape(order[i]);
    inverse[order[i]] = i;
  }
  return permute(empty(stored, t.dtype(), t.device()), inverse);
}

// dq, dk and dv for q, k and v. When these are equal-strided views of one buffer at evenly spaced
// offsets (the unbound pieces of a fused qkv projection), the gradients are the same views of one
// fresh buffer: unbind's backward then finds them already in place and copies nothing (GPT-2
// small: 9.4 MB per layer).
std::vector<Tensor> empty_grads(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t step = k.offset() - q.offset();
  bool packed = q.impl()->storage == k.impl()->storage && k.impl()->storage == v.impl()->storage && step > 0 &&
                v.offset() - k.offset() == step && q.strides() == k.strides() && k.strides() == v.strides() &&
                q.shape() == k.shape() && k.shape() == v.shape();
  int64_t extent = 1;  // elements from a view's first to one past its last
  for (int64_t d = 0; packed && d < q.ndim(); ++d) {
    packed = q.strides()[d] > 0;
    extent += (q.shape(d) - 1) * q.strides()[d];
  }
  if (!packed || q.numel() == 0) return {empty_like_layout(q), empty_like_layout(k), empty_like_layout(v)};
  const Tensor buf = empty({2 * step + extent}, q.dtype(), q.device());
  return {make_view(buf, q.shape(), q.strides(), 0), make_view(buf, q.shape(), q.strides(), step),
          make_view(buf, q.shape(), q.strides(), 2 * step)};
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts) {
  const bool half_ok = detail::native_half(q);
  detail::check_float(q, kOp, "q", half_ok);
  detail::check_float(k, kOp, "k", half_ok);
  detail::check_float(v, kOp, "v", half_ok);
  detail::check_same_dtype(q, k, kOp);
  detail::check_same_dtype(q, v, kOp);
  MF_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, kOp, ": q ", q.str(), ", k ", k.str(), ", v ", v.str(),
           " must all be rank 4 (B, H, T, D)");
  const int64_t B = q.shape(0), H = q.shape(1), Tq = q.shape(2), D = q.shape(3), Tk = k.shape(2);
  MF_CHECK(k.shape(0) == B && v.shape(0) == B && k.shape(1) == H && v.shape(1) == H, kOp, ": batch/head mismatch, q ",
           q.str(), ", k ", k.str(), ", v ", v.str());
  MF_CHECK(k.shape(3) == D && v.shape(3) == D, kOp, ": head dim mismatch, q ", q.str(), ", k ", k.str(), ", v ",
           v.str());
  MF_CHECK(v.shape(2) == Tk, kOp, ": k ", k.str(), " and v ", v.str(), " differ in sequence length");
  MF_CHECK(D > 0 && Tk > 0, kOp, ": empty head dim or key sequence, q ", q.str(), ", k ", k.str());
  MF_CHECK(!opts.causal || Tq <= Tk, kOp, ": causal attention needs Tq <= Tk (the queries are the last Tq positions), got q ",
           q.str(), ", k ", k.str());
  MF_CHECK(opts.window >= 0 && (opts.window == 0 || opts.causal), kOp, ": a sliding window (", opts.window,
           ") needs causal attention and must be >= 0");
  MF_CHECK(opts.dropout_p >= 0.0 && opts.dropout_p < 1.0, kOp, ": dropout_p must be in [0, 1), got ", opts.dropout_p);
  MF_CHECK(std::isfinite(opts.scale), kOp, ": scale must be finite, got ", opts.scale);
  Tensor mask;
  if (opts.key_padding_mask.defined()) {
    const Tensor& m = opts.key_padding_mask;
    MF_CHECK(m.dtype() == DType::kBool && m.ndim() == 2 && m.shape(0) == B && m.shape(1) == Tk, kOp,
             ": key_padding_mask ", m.str(), " must be bool (B, Tk) = (", B, ", ", Tk, ") for q ", q.str(), ", k ",
             k.str());
    MF_CHECK(m.device() == q.device(), kOp, ": key_padding_mask ", m.str(), " is not on the device of q ", q.str());
    mask = contiguous(m.detach());
  }

  kernels::AttentionParams p;
  p.causal = opts.causal;
  p.window = opts.window;
  p.scale = opts.scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : opts.scale;
  p.dropout_p = opts.dropout_p;
  if (p.dropout_p > 0.0) {
    Generator& g = opts.gen ? *opts.gen : default_generator();
    p.seed = g.seed();
    p.stream = g.take_stream();
    const BatchSlice& bs = current_batch_slice();
    if (bs.active()) {
      MF_CHECK(bs.start + B <= bs.logical_rows, kOp, ": a batch of ", B, " rows starting at ", bs.start,
               " does not fit in the logical batch of ", bs.logical_rows, " rows");
    }
    MF_CHECK(opts.logical_heads == 0 || (opts.head_offset >= 0 && opts.head_offset + H <= opts.logical_heads), kOp,
             ": heads [", opts.head_offset, ", ", opts.head_offset + H, ") do not fit in logical_heads ", opts.logical_heads);
    p.logical_heads = opts.logical_heads > 0 ? opts.logical_heads : H;
    p.head_offset = opts.head_offset;
    if (bs.active()) p.dropout_offset = static_cast<uint64_t>(bs.start * p.logical_heads * Tq * Tk);
  }

  Tensor qk = kernel_view(q.detach()), kk = kernel_view(k.detach()), vk = kernel_view(v.detach());
  Tensor out = permute(empty({B, Tq, H, D}, q.dtype(), q.device()), {0, 2, 1, 3});
  Tensor lse = empty({B, H, Tq}, compute_dtype(q.dtype()), q.device());  // f32 for bf16/f16 q
  kernel<kernels::AttentionForward>("attention_forward", q.device(), q.dtype())(qk, kk, vk, mask, p, out, lse);
  if (!any_requires_grad({q, k, v})) return out;

  Tensor so = out.detach();
  record(kOp, {q, k, v}, {out}, [qk, kk, vk, so, lse, mask, p](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor go = kernel_view(g[0]);
    std::vector<Tensor> d = empty_grads(qk, kk, vk);  // dq, dk, dv
    kernel<kernels::AttentionBackward>("attention_backward", qk.device(), qk.dtype())(go, qk, kk, vk, so, lse, mask, p,
                                                                                      d[0], d[1], d[2]);
    return d;
  });
  return out;
}

}  // namespace mf
