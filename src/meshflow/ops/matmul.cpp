// matmul and linear through the registry's GEMM. Transposed views are passed to the BLAS as
// transpose flags with their leading dimension: no copies around the call. bf16/f16 operands run
// natively where the half GEMM is registered (CUDA: f32 accumulation, one rounding of C).
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {

struct GemmOperand {
  Tensor t;      // storage owner (may be a contiguous copy)
  bool trans;    // BLAS transpose flag
  int64_t ld;    // leading dimension in elements
};

// A (rows, cols) matrix view as a BLAS operand: row-major, column-major (= transposed), or a copy.
GemmOperand as_operand(const Tensor& m, int64_t rows, int64_t cols, int64_t s_row, int64_t s_col) {
  if (s_col == 1 && (s_row >= std::max<int64_t>(cols, 1) || rows == 1)) return {m, false, rows == 1 ? cols : s_row};
  if (s_row == 1 && (s_col >= std::max<int64_t>(rows, 1) || cols == 1)) return {m, true, cols == 1 ? rows : s_col};
  return {Tensor(), false, 0};
}

// a (..., M, K), b (..., K, N) with equal batch shapes (already broadcast) -> out (..., M, N),
// contiguous; beta 1 adds into out.
void batched_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out, double beta = 0.0) {
  int64_t nd = a_in.ndim();
  int64_t M = a_in.shape(-2), K = a_in.shape(-1), N = b_in.shape(-1);
  Tensor a = a_in, b = b_in;
  GemmOperand oa = as_operand(a, M, K, a.stride(-2), a.stride(-1));
  if (!oa.t.defined()) { a = contiguous(a); oa = {a, false, K}; }
  GemmOperand ob = as_operand(b, K, N, b.stride(-2), b.stride(-1));
  if (!ob.t.defined()) { b = contiguous(b); ob = {b, false, N}; }
  auto gemm = kernel<kernels::Gemm>("gemm", out.device(), out.dtype());
  size_t esz = dtype_nbytes(out.dtype());
  int64_t batch = out.numel() / std::max<int64_t>(M * N, 1);
  if (M * N == 0) return;
  const Shape& os = out.shape();
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t rem = bi, offa = 0, offb = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      int64_t idx = rem % os[d];
      rem /= os[d];
      offa += idx * a.stride(d);
      offb += idx * b.stride(d);
    }
    const char* pa = static_cast<const char*>(a.raw_data()) + offa * static_cast<int64_t>(esz);
    const char* pb = static_cast<const char*>(b.raw_data()) + offb * static_cast<int64_t>(esz);
    char* pc = static_cast<char*>(out.raw_data()) + bi * M * N * static_cast<int64_t>(esz);
    gemm(oa.trans, ob.trans, M, N, K, 1.0, pa, oa.ld, pb, ob.ld, beta, pc, N);
  }
}

Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  int64_t M = a.shape(-2), K = a.shape(-1), K2 = b.shape(-2), N = b.shape(-1);
  MF_CHECK(K == K2, "matmul: inner dimensions differ, ", a.str(), " @ ", b.str());
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape as = batch, bs = batch, os = batch;
  as.insert(as.end(), {M, K});
  bs.insert(bs.end(), {K, N});
  os.insert(os.end(), {M, N});
  Tensor out = empty(os, a.dtype(), a.device());
  Tensor ad = a.detach(), bd = b.detach();
  // Fold a's batch into M when b is shared across the batch and a's rows are contiguous.
  if (bb.empty() && ba.size() > 0 && a.is_contiguous()) {
    batched_gemm(view(ad, {-1, K}), bd, view(out, {-1, N}));
  } else {
    batched_gemm(expand(ad, as), expand(bd, bs), out);
  }
  if (!any_requires_grad({a, b})) return out;
  bool ga = a.requires_grad(), gb = b.requires_grad();
  Shape a_shape = a.shape(), b_shape = b.shape();
  record("matmul", {a, b}, {out}, [ad, bd, ga, gb, a_shape, b_shape](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor da, db;
    if (ga) da = sum_to(matmul(g[0], transpose(bd, -1, -2)), a_shape);
    if (gb) {
      if (bd.ndim() == 2 && ad.ndim() > 2 && g[0].is_contiguous() && ad.is_contiguous()) {
        int64_t K = ad.shape(-1), N = g[0].shape(-1);
        db = matmul(transpose(view(ad, {-1, K}), 0, 1), view(g[0], {-1, N}));
      } else {
        db = sum_to(matmul(transpose(ad, -1, -2), g[0]), b_shape);
      }
    }
    return {da, db};
  });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const bool half_ok = detail::native_half(a);
  detail::check_float(a, "matmul", "a", half_ok);
  detail::check_float(b, "matmul", "b", half_ok);
  detail::check_same_dtype(a, b, "matmul");
  MF_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul: operands must have at least 1 axis, got ", a.str(), " @ ", b.str());
  if (a.ndim() == 1 && b.ndim() == 1) return reshape(matmul_nd(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  if (a.ndim() == 1) return squeeze(matmul_nd(unsqueeze(a, 0), b), -2);
  if (b.ndim() == 1) return squeeze(matmul_nd(a, unsqueeze(b, 1)), -1);
  return matmul_nd(a, b);
}

namespace {

// y (..., N) = x (..., K) @ op(W) + bias, with W stored (N, K) ("linear", op = transpose) or
// (K, N) ("affine", op = identity). One GEMM, bias written first and accumulated with beta = 1.
Tensor linear_impl(const char* name, const Tensor& x, const Tensor& weight, const Tensor& bias, bool w_in_out) {
  const bool half_ok = detail::native_half(x);
  detail::check_float(x, name, "x", half_ok);
  detail::check_float(weight, name, "weight", half_ok);
  detail::check_same_dtype(x, weight, name);
  MF_CHECK(weight.ndim() == 2, name, ": weight ", weight.str(), " must be ",
           w_in_out ? "(in_features, out_features)" : "(out_features, in_features)");
  int64_t K = weight.shape(w_in_out ? 0 : 1), N = weight.shape(w_in_out ? 1 : 0);
  MF_CHECK(x.ndim() >= 1 && x.shape(-1) == K, name, ": input ", x.str(), " does not match weight ", weight.str(),
           " (in_features ", K, ")");
  if (bias.defined()) {
    detail::check_float(bias, name, "bias", half_ok);
    detail::check_same_dtype(x, bias, name);
    MF_CHECK(bias.ndim() == 1 && bias.shape(0) == N, name, ": bias ", bias.str(), " must be (", N, ",)");
  }
  Tensor x2 = reshape(x.detach(), {-1, K});  // a view for contiguous x
  int64_t M = x2.shape(0);
  Shape os = x.shape();
  os.back() = N;
  Tensor out = empty(os, x.dtype(), x.device());
  Tensor out2 = view(out, {M, N});
  // A backend with a fused bias epilogue ("gemm_bias_act", CUDA) adds the bias inside the GEMM;
  // elsewhere (the CPU) the bias is written first and accumulated with beta = 1.
  const bool fuse_bias = bias.defined() && M > 0 && K > 0 &&
                         kernel_registry().has("gemm_bias_act", x.device().type, x.dtype());
  double beta = 0.0;
  if (bias.defined() && M > 0 && !fuse_bias) {  // C := broadcast bias, then C = x op(W) + C
    copy_(out2, expand(bias.detach(), {M, N}));
    beta = 1.0;
  }
  Tensor w = contiguous(weight.detach());
  GemmOperand ox = as_operand(x2, M, K, x2.stride(0), x2.stride(1));
  if (!ox.t.defined()) { x2 = contiguous(x2); ox = {x2, false, K}; }
  if (fuse_bias) {
    Tensor bc = contiguous(bias.detach());
    kernel<kernels::GemmBiasAct>("gemm_bias_act", x.device(), x.dtype())(
        ox.trans, !w_in_out, M, N, K, x2.raw_data(), ox.ld, w.raw_data(), w_in_out ? N : K, bc.raw_data(), /*act=*/0,
        out2.raw_data(), N, /*pre_act=*/nullptr);
  } else {
    kernel<kernels::Gemm>("gemm", x.device(), x.dtype())(ox.trans, !w_in_out, M, N, K, 1.0, x2.raw_data(), ox.ld,
                                                         w.raw_data(), w_in_out ? N : K, beta, out2.raw_data(), N);
  }
  if (!any_requires_grad({x, weight, bias})) return out;
  bool gx = x.requires_grad(), gw = weight.requires_grad(), gbias = bias.requires_grad();
  Shape x_shape = x.shape();
  Tensor saved_x = gw ? x2 : Tensor(), saved_w = gx ? w : Tensor();  // dW reads x, dx reads W
  record(name, {x, weight, bias}, {out}, [x2 = saved_x, w = saved_w, gx, gw, gbias, x_shape, M, N, w_in_out](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor g2 = reshape(g[0], {M, N});
    Tensor dx, dw, db;
    if (gx) dx = reshape(matmul(g2, w_in_out ? transpose(w, 0, 1) : w), x_shape);  // (M,N) @ (N,K)
    if (gw) {
      const Tensor a = w_in_out ? transpose(x2, 0, 1) : transpose(g2, 0, 1);  // (K,M) or (N,M)
      const Tensor b = w_in_out ? g2 : x2;                                    // (M,N) or (M,K)
      // The weight a leaf whose .grad exists (the loss head's later chunks, the tied table;
      // every weight from the second micro-batch of an accumulating step): the GEMM adds into
      // it (beta = 1), with no weight-sized gradient made and then summed in.
      if (const Tensor acc = accumulation_target(1, {a.shape(0), b.shape(1)}, g2.dtype(), g2.device()); acc.defined()) {
        batched_gemm(a, b, acc, 1.0);
      } else {
        dw = matmul(a, b);
      }
    }
    if (gbias) db = sum(g2, {0});
    return {dx, dw, db};
  });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl("linear", x, weight, bias, false);
}

Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl("affine", x, weight, bias, true);
}

}  // namespace mf
