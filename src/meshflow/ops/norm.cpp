// layer_norm and rms_norm over the last axis; backward through fused kernels.
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
void check_norm_params(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::check_float(x, op, "x");
  MF_CHECK(x.ndim() >= 1, op, ": x ", x.str(), " must have at least 1 axis");
  int64_t C = x.shape(-1);
  detail::check_float(w, op, "weight");
  detail::check_same_dtype(x, w, op);
  MF_CHECK(w.ndim() == 1 && w.shape(0) == C, op, ": weight ", w.str(), " does not match the last axis of x ", x.str());
  if (b.defined()) {
    detail::check_float(b, op, "bias");
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
  Tensor mean = empty(rows_shape(x), x.dtype(), x.device()), rstd = empty(rows_shape(x), x.dtype(), x.device());
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
  Tensor rstd = empty(rows_shape(x), x.dtype(), x.device());
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
