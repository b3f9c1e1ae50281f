// softmax and log_softmax along an axis (kernels work on the last; other axes transpose).
// bf16/f16 x runs natively where both half kernels are registered (CUDA): y and dx bf16/f16.
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {

Tensor softmax_last(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  Tensor xc = contiguous(x.detach());
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::SoftmaxForward>("softmax", x.device(), x.dtype())(xc, y, log);
  Tensor ys = y.detach();
  record(name, {x}, {y}, [ys, log](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dy = contiguous(g[0]);
    Tensor dx = empty(ys.shape(), ys.dtype(), ys.device());
    kernel<kernels::SoftmaxBackward>("softmax_backward", ys.device(), ys.dtype())(dy, ys, dx, log);
    return {dx};
  });
  return y;
}

Tensor softmax_axis(const Tensor& x, int64_t axis, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_float(x, name, "x", detail::native_half(x));
  MF_CHECK(x.ndim() >= 1, name, ": x ", x.str(), " must have at least 1 axis");
  int64_t ax = normalize_axis(axis, x.ndim(), name);
  if (ax == x.ndim() - 1) return softmax_last(x, log);
  return transpose(softmax_last(transpose(x, ax, -1), log), ax, -1);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) { return softmax_axis(x, axis, false); }
Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_axis(x, axis, true); }

}  // namespace mf
