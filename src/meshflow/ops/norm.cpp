// layer_norm and rms_norm over the last axis; backward through fused kernels.
//
// bf16/f16 x, weight and bias run natively where the half kernels are registered (CUDA): y and
// the gradients are bf16/f16, the statistics (mean, rstd) f32 — statistics always have the
// compute dtype (compute_dtype: f32 for bf16/f16, else x's dtype).
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
void check_norm_params(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  const bool half_ok = detail::native_half(x);
  detail::check_float(x, op, "x", half_ok);
  MF_CHECK(x.ndim() >= 1, op, ": x ", x.str(), " must have at least 1 axis");
  int64_t C = x.shape(-1);
  detail::check_float(w, op, "weight", half_ok);
  detail::check_same_dtype(x, w, op);
  MF_CHECK(w.ndim() == 1 && w.shape(0) == C, op, ": weight ", w.str(), " does not match the last axis of x ", x.str());
  if (b.defined()) {
    detail::check_float(b, op, "bias", half_ok);
    detail::check_same_dtype(x, b, op);
    MF_CHECK(b.ndim() == 1 && b.shape(0) == C, op, ": bias ", b.str(), " does not match the last axis of x ", x.str());
  }
}
Shape rows_shape(const Tensor& x) {
  Shape s = x.shape();
  s.pop_back();
  return s;
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_norm_params("layer_norm", x, weight, bias);
  Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
  Tensor bc = bias.defined() ? contiguous(bias.detach()) : Tensor();
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  const DType stat_dt = compute_dtype(x.dtype());  // f32 for bf16/f16 x
  Tensor mean = empty(rows_shape(x), stat_dt, x.device()), rstd = empty(rows_shape(x), stat_dt, x.device());
  kernel<kernels::LayerNormForward>("layer_norm", x.device(), x.dtype())(xc, wc, bc, eps, y, mean, rstd);
  bool gx = x.requires_grad(), gw = weight.requires_grad(), gb = bias.requires_grad();
  record("layer_norm", {x, weight, bias}, {y}, [xc, wc, mean, rstd, gx, gw, gb](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dy = contiguous(g[0]);
    Tensor dx = gx ? empty(xc.shape(), xc.dtype(), xc.device()) : Tensor();
    Tensor dw = gw ? empty(wc.shape(), wc.dtype(), wc.device()) : Tensor();
    Tensor db = gb ? empty(wc.shape(), wc.dtype(), wc.device()) : Tensor();
    kernel<kernels::LayerNormBackward>("layer_norm_backward", xc.device(), xc.dtype())(dy, xc, wc, mean, rstd, dx, dw, db);
    return {dx, dw, db};
  });
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_norm_params("rms_norm", x, weight, Tensor());
  Tensor xc = contiguous(x.detach()), wc = contiguous(weight.detach());
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = empty(rows_shape(x), compute_dtype(x.dtype()), x.device());  // f32 for bf16/f16 x
  kernel<kernels::RmsNormForward>("rms_norm", x.device(), x.dtype())(xc, wc, eps, y, rstd);
  bool gx = x.requires_grad(), gw = weight.requires_grad();
  record("rms_norm", {x, weight}, {y}, [xc, wc, rstd, gx, gw](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dy = contiguous(g[0]);
    Tensor dx = gx ? empty(xc.shape(), xc.dtype(), xc.device()) : Tensor();
    Tensor dw = gw ? empty(wc.shape(), wc.dtype(), wc.device()) : Tensor();
    kernel<kernels::RmsNormBackward>("rms_norm_backward", xc.device(), xc.dtype())(dy, xc, wc, rstd, dx, dw);
    return {dx, dw};
  });
  return y;
}

}  // namespace mf
