// sum / mean / max over axes, and sum_to (the gradient of broadcasting).
//
// bf16/f16 inputs reduce natively where the half kernels are registered (CUDA: f32 accumulation,
// a bf16/f16 result); the CPU refuses them (cast first), except sum_squares, which always widens
// them to f32 and returns an f32 result (a norm's square must not round or overflow in f16).
#include <algorithm>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t nd, const char* op) {
  std::vector<int64_t> r;
  if (axes.empty()) {
    for (int64_t i = 0; i < nd; ++i) r.push_back(i);
    return r;
  }
  for (int64_t a : axes) r.push_back(normalize_axis(a, nd, op));
  std::sort(r.begin(), r.end());
  MF_CHECK(std::adjacent_find(r.begin(), r.end()) == r.end(), op, ": repeated axis");
  return r;
}

// Sums one axis of a contiguous tensor, keeping it as size 1. No autograd.
Tensor reduce_axis_raw(kernels::ReduceOp op, const Tensor& xc, int64_t ax, Tensor* argmax) {
  const Shape& s = xc.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= s[i];
  for (size_t i = ax + 1; i < s.size(); ++i) inner *= s[i];
  Shape os = s;
  os[ax] = 1;
  Tensor out = empty(os, xc.dtype(), xc.device());
  Tensor arg = op == kernels::ReduceOp::kMax ? empty(os, DType::kI64, xc.device()) : Tensor();
  kernel<kernels::Reduce>("reduce", xc.device(), xc.dtype())(op, xc, outer, s[ax], inner, out, arg);
  if (argmax) *argmax = arg;
  return out;
}

Shape drop_axes(const Shape& s, const std::vector<int64_t>& axes) {
  Shape r;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i)
    if (!std::binary_search(axes.begin(), axes.end(), i)) r.push_back(s[i]);
  return r;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const bool half_ok = detail::native_half(x);
  detail::check_float(x, "sum", "x", half_ok);
  std::vector<int64_t> ax = normalize_axes(axes, x.ndim(), "sum");
  // bf16/f16 over several axes: one axis at a time would round every partial result to
  // bf16/f16, so sum in f32 and round once.
  if (half_ok && ax.size() > 1) return cast(sum(cast(x, DType::kF32), axes, keepdim), x.dtype());
  Tensor cur = contiguous(x.detach());
  for (auto it = ax.rbegin(); it != ax.rend(); ++it) cur = reduce_axis_raw(kernels::ReduceOp::kSum, cur, *it, nullptr);
  Shape kept = cur.shape();
  Tensor out = keepdim ? cur : make_view(cur, drop_axes(kept, ax), contiguous_strides(drop_axes(kept, ax)), cur.offset());
  Shape in_shape = x.shape();
  record("sum", {x}, {out}, [in_shape, kept](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {contiguous(expand(reshape(g[0], kept), in_shape))};
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  detail::check_float(x, "mean", "x", detail::native_half(x));
  std::vector<int64_t> ax = normalize_axes(axes, x.ndim(), "mean");
  int64_t count = 1;
  for (int64_t a : ax) count *= x.shape()[a];
  MF_CHECK(count > 0, "mean: reducing ", x.str(), " over an empty axis");
  return scale(sum(x, axes, keepdim), 1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, int64_t axis, bool keepdim) {
  detail::check_float(x, "max", "x", detail::native_half(x));
  int64_t ax = normalize_axis(axis, x.ndim(), "max");
  MF_CHECK(x.shape()[ax] > 0, "max: axis ", ax, " of ", x.str(), " is empty");
  Tensor arg;
  Tensor cur = reduce_axis_raw(kernels::ReduceOp::kMax, contiguous(x.detach()), ax, &arg);
  Shape kept = cur.shape();
  Tensor out = keepdim ? cur : make_view(cur, drop_axes(kept, {ax}), contiguous_strides(drop_axes(kept, {ax})), cur.offset());
  Shape in_shape = x.shape();
  DType dt = x.dtype();
  Device dev = x.device();
  record("max", {x}, {out}, [in_shape, kept, arg, ax, dt, dev](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= in_shape[i];
    for (size_t i = ax + 1; i < in_shape.size(); ++i) inner *= in_shape[i];
    Tensor dx = zeros(in_shape, dt, dev);
    Tensor gc = contiguous(reshape(g[0], kept));
    kernel<kernels::ScatterAdd>("scatter_add", dev, dt)(make_view(gc, {outer, 1, inner}, {inner, inner, 1}, gc.offset()),
                                                        make_view(arg, {outer, 1, inner}, {inner, inner, 1}, 0),
                                                        make_view(dx, {outer, in_shape[ax], inner},
                                                                  {in_shape[ax] * inner, inner, 1}, 0));
    return {dx};
  });
  return out;
}

Tensor sum_squares(const Tensor& x) {
  // bf16/f16 (gradients under mixed precision): widened to f32, accumulated as f32's are (in f64),
  // on every device — the result is f32, and the reduce kernel's output has its input's dtype.
  if (x.defined() && is_half(x.dtype())) return sum_squares(cast(x.detach(), DType::kF32));
  detail::check_float(x, "sum_squares", "x");
  Tensor xc = contiguous(x.detach());
  Tensor out = empty({}, x.dtype(), x.device());
  kernel<kernels::Reduce>("reduce", x.device(), x.dtype())(kernels::ReduceOp::kSumSquares, xc, 1, xc.numel(), 1, out,
                                                           Tensor());
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "sum_to", "x");
  if (x.shape() == shape) return x;
  int64_t nd = x.ndim(), lead = nd - static_cast<int64_t>(shape.size());
  MF_CHECK(lead >= 0, "sum_to: cannot reduce ", x.str(), " to ", shape_str(shape));
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < nd; ++i) {
    if (i < lead) {
      axes.push_back(i);
    } else if (shape[i - lead] == 1 && x.shape()[i] != 1) {
      axes.push_back(i);
    } else {
      MF_CHECK(shape[i - lead] == x.shape()[i], "sum_to: cannot reduce ", x.str(), " to ", shape_str(shape));
    }
  }
  if (axes.empty()) return reshape(x, shape);
  return reshape(sum(x, axes, true), shape);
}

}  // namespace mf
