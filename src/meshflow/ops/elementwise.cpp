// Elementwise ops with broadcasting, scalar ops and activations; backward via sum_to.
//
// bf16/f16 operands: where the half kernels of an op (forward and backward) are registered
// (CUDA), the op runs on them natively — the kernels compute in f32 and round once into the
// bf16/f16 output. Elsewhere (the CPU) binary and unary ops widen them to f32, compute, and round
// the result once to bf16/f16, which is the same arithmetic.
#include "meshflow/ops/op_utils.h"

namespace mf {

using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

Tensor binary(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  const bool half_ok = detail::native_half(a);
  // bf16/f16 operands without half kernels (gradients of half-precision parameters meeting in
  // backward, on the CPU): computed in f32 and rounded once to the operands' dtype.
  if (!half_ok && a.defined() && b.defined() && is_half(a.dtype()) && a.dtype() == b.dtype())
    return cast(binary(op, name, cast(a, DType::kF32), cast(b, DType::kF32)), a.dtype());
  detail::check_float(a, name, "a", half_ok);
  detail::check_float(b, name, "b", half_ok);
  detail::check_same_dtype(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, a.dtype(), a.device());
  kernel<kernels::Binary>("binary", a.device(), a.dtype())(op, expand(a.detach(), shape), expand(b.detach(), shape), out);
  if (!any_requires_grad({a, b})) return out;
  bool ga = a.requires_grad(), gb = b.requires_grad();
  // Save only what the formula reads (activation memory): add/sub need just the shapes.
  bool is_mul = op == BinaryOp::kMul, is_div = op == BinaryOp::kDiv;
  Tensor sa = is_mul && gb ? a.detach() : Tensor();
  Tensor sb = (is_mul && ga) || is_div ? b.detach() : Tensor();
  Tensor so = is_div && gb ? out.detach() : Tensor();
  Shape as = a.shape(), bs = b.shape();
  record(name, {a, b}, {out}, [op, ga, gb, sa, sb, so, as, bs](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    const Tensor& go = g[0];
    Tensor da, db;
    switch (op) {
      case BinaryOp::kAdd:
        if (ga) da = sum_to(go, as);
        if (gb) db = sum_to(go, bs);
        break;
      case BinaryOp::kSub:
        if (ga) da = sum_to(go, as);
        if (gb) db = neg(sum_to(go, bs));
        break;
      case BinaryOp::kMul:
        if (ga) da = sum_to(mul(go, sb), as);
        if (gb) db = sum_to(mul(go, sa), bs);
        break;
      case BinaryOp::kDiv:
        if (ga) da = sum_to(div(go, sb), as);
        if (gb) db = neg(sum_to(div(mul(go, so), sb), bs));
        break;
    }
    return {da, db};
  });
  return out;
}

Tensor unary(UnaryOp op, const char* name, const Tensor& x, double alpha) {
  const bool half_ok = detail::native_half(x);
  if (!half_ok && x.defined() && is_half(x.dtype()))
    return cast(unary(op, name, cast(x, DType::kF32), alpha), x.dtype());
  detail::check_float(x, name, "x", half_ok);
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::Unary>("unary", x.device(), x.dtype())(op, alpha, xc, out);
  if (!any_requires_grad({x})) return out;
  bool keep_x = op == UnaryOp::kLog || op >= UnaryOp::kGeluTanh;
  bool keep_out = op == UnaryOp::kExp || op == UnaryOp::kSqrt;
  Tensor sx = keep_x ? xc : Tensor(), so = keep_out ? out.detach() : Tensor();
  record(name, {x}, {out}, [op, alpha, xc = sx, so](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    switch (op) {
      case UnaryOp::kNeg: return {neg(g[0])};
      case UnaryOp::kScale: return {scale(g[0], alpha)};
      case UnaryOp::kAddScalar: return {g[0]};
      case UnaryOp::kExp: return {mul(g[0], so)};
      case UnaryOp::kLog: return {div(g[0], xc)};
      case UnaryOp::kSqrt: return {div(scale(g[0], 0.5), so)};
      case UnaryOp::kGeluTanh: return {gelu_backward(g[0], xc, true)};
      case UnaryOp::kGeluErf: return {gelu_backward(g[0], xc, false)};
      case UnaryOp::kSilu: return {silu_backward(g[0], xc)};
      case UnaryOp::kRelu: return {relu_backward(g[0], xc)};
      case UnaryOp::kTanh: return {tanh_backward(g[0], xc)};
    }
    return {Tensor()};
  });
  return out;
}

Tensor activation_backward(UnaryOp op, const char* name, const Tensor& dy, const Tensor& x) {
  const bool half_ok = detail::native_half(x);
  detail::check_float(dy, name, "dy", half_ok);
  detail::check_float(x, name, "x", half_ok);
  detail::check_same_dtype(dy, x, name);
  MF_CHECK(dy.shape() == x.shape(), name, ": dy ", dy.str(), " and x ", x.str(), " differ in shape");
  Tensor dx = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::ActivationBackward>("activation_backward", x.device(), x.dtype())(op, contiguous(dy.detach()),
                                                                                   contiguous(x.detach()), dx);
  return dx;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kAdd, "add", a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kSub, "sub", a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMul, "mul", a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kDiv, "div", a, b); }
Tensor scale(const Tensor& x, double s) { return unary(UnaryOp::kScale, "scale", x, s); }
Tensor add_scalar(const Tensor& x, double s) { return unary(UnaryOp::kAddScalar, "add_scalar", x, s); }
Tensor neg(const Tensor& x) { return unary(UnaryOp::kNeg, "neg", x, 0.0); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::kExp, "exp", x, 0.0); }
Tensor log(const Tensor& x) { return unary(UnaryOp::kLog, "log", x, 0.0); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::kSqrt, "sqrt", x, 0.0); }
Tensor gelu(const Tensor& x, bool tanh_approx) {
  return unary(tanh_approx ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf, "gelu", x, 0.0);
}
Tensor silu(const Tensor& x) { return unary(UnaryOp::kSilu, "silu", x, 0.0); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::kRelu, "relu", x, 0.0); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::kTanh, "tanh", x, 0.0); }

Tensor gelu_backward(const Tensor& dy, const Tensor& x, bool tanh_approx) {
  return activation_backward(tanh_approx ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf, "gelu_backward", dy, x);
}
Tensor silu_backward(const Tensor& dy, const Tensor& x) {
  return activation_backward(UnaryOp::kSilu, "silu_backward", dy, x);
}
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return activation_backward(UnaryOp::kRelu, "relu_backward", dy, x);
}
Tensor tanh_backward(const Tensor& dy, const Tensor& x) {
  return activation_backward(UnaryOp::kTanh, "tanh_backward", dy, x);
}

}  // namespace mf
