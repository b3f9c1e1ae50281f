// Global elementwise ops: binary add/sub/mul (b the same shape as a, or a suffix of it: a bias
// over a's leading axes), scale, and the non-linear unary activations (see global_ops.h).
#include <algorithm>
#include <string>

#include "meshflow/core/error.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

namespace {

Sbp S(int64_t axis) { return Sbp::split(static_cast<int>(axis)); }
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();

GlobalTensor binary(const char* name, Linearity linearity, const GlobalContext& ctx, const GlobalTensor& a,
                    const GlobalTensor& b, Tensor (*fn)(const Tensor&, const Tensor&)) {
  const Shape& as = a.logical_shape;
  const Shape& bs = b.logical_shape;
  const bool suffix = bs.size() <= as.size() && std::equal(bs.begin(), bs.end(), as.end() - static_cast<ptrdiff_t>(bs.size()));
  MF_CHECK(suffix, "global ", name, ": b ", shape_str(bs), " must equal a ", shape_str(as),
           " or its trailing axes (rank ", ctx.world_rank, ")");
  return apply_global(ctx, name, {a, b}, {as}, [&] { return binary_signatures(as, bs, linearity); },
                      [fn](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {fn(t[0], t[1])}; })[0];
}

GlobalTensor unary(const std::string& name, bool linear, const GlobalContext& ctx, const GlobalTensor& x,
                   const std::function<Tensor(const Tensor&)>& fn) {
  const Shape& xs = x.logical_shape;
  return apply_global(ctx, name, {x}, {xs}, [&] { return unary_signatures(xs, linear); },
                      [&fn](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {fn(t[0])}; })[0];
}

}  // namespace

SignatureList binary_signatures(const Shape& a, const Shape& b, Linearity linearity) {
  const int64_t na = static_cast<int64_t>(a.size()), offset = na - static_cast<int64_t>(b.size());
  MF_CHECK(offset >= 0, "binary signatures: b ", shape_str(b), " has more axes than a ", shape_str(a));
  SignatureList l;
  for (int64_t i = 0; i < na; ++i) l.push_back({{S(i), i >= offset ? S(i - offset) : kB}, {S(i)}});
  if (linearity == Linearity::kAdditive) l.push_back({{kP, kP}, {kP}});  // sum of partials adds
  if (linearity == Linearity::kMultiplicative) {                         // linear in each factor
    l.push_back({{kP, kB}, {kP}});
    l.push_back({{kB, kP}, {kP}});
  }
  l.push_back({{kB, kB}, {kB}});
  return l;
}

SignatureList unary_signatures(const Shape& x, bool linear) {
  SignatureList l;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) l.push_back({{S(i)}, {S(i)}});
  if (linear) l.push_back({{kP}, {kP}});
  l.push_back({{kB}, {kB}});
  return l;
}

GlobalTensor add(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b) {
  return binary("add", Linearity::kAdditive, ctx, a, b, &mf::add);
}
GlobalTensor sub(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b) {
  return binary("sub", Linearity::kAdditive, ctx, a, b, &mf::sub);
}
GlobalTensor mul(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b) {
  return binary("mul", Linearity::kMultiplicative, ctx, a, b, &mf::mul);
}

GlobalTensor scale(const GlobalContext& ctx, const GlobalTensor& x, double s) {
  // The factor does not change the signatures, so it stays out of the cache key.
  return unary("scale", true, ctx, x, [s](const Tensor& t) { return mf::scale(t, s); });
}
GlobalTensor gelu(const GlobalContext& ctx, const GlobalTensor& x, bool tanh_approx) {
  return unary("gelu", false, ctx, x, [tanh_approx](const Tensor& t) { return mf::gelu(t, tanh_approx); });
}
GlobalTensor tanh(const GlobalContext& ctx, const GlobalTensor& x) {
  return unary("tanh", false, ctx, x, [](const Tensor& t) { return mf::tanh(t); });
}

GlobalTensor relu(const GlobalContext& ctx, const GlobalTensor& x) {
  return unary("relu", false, ctx, x, [](const Tensor& t) { return mf::relu(t); });
}
GlobalTensor silu(const GlobalContext& ctx, const GlobalTensor& x) {
  return unary("silu", false, ctx, x, [](const Tensor& t) { return mf::silu(t); });
}
GlobalTensor exp(const GlobalContext& ctx, const GlobalTensor& x) {
  return unary("exp", false, ctx, x, [](const Tensor& t) { return mf::exp(t); });
}

}  // namespace mf::global
