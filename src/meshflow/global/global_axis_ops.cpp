// Global ops working along one axis: softmax and layer_norm over the last axis (which must stay
// whole), sum over an axis (a split there becomes P), transpose (see global_ops.h).
#include <string>
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

namespace {

Sbp S(int64_t axis) { return Sbp::split(static_cast<int>(axis)); }
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();

int64_t normalize_axis(int64_t axis, size_t ndim, const char* op, int rank) {
  const int64_t n = static_cast<int64_t>(ndim);
  MF_CHECK(axis >= -n && axis < n, "global ", op, ": axis ", axis, " out of range for ", n, " axes (rank ", rank, ")");
  return axis < 0 ? axis + n : axis;
}

}  // namespace

SignatureList last_axis_signatures(const Shape& x, int n_params) {
  SignatureList l;
  auto sig = [n_params](Sbp xs, Sbp params) {
    Signature s{{xs}, {xs}};
    for (int i = 0; i < n_params; ++i) s.inputs.push_back(params);
    return s;
  };
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(x.size()); ++i) l.push_back(sig(S(i), kB));
  l.push_back(sig(kB, kB));
  return l;
}

SignatureList sum_signatures(const Shape& x, int64_t axis) {
  SignatureList l;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i)
    l.push_back({{S(i)}, {i == axis ? kP : S(i < axis ? i : i - 1)}});
  l.push_back({{kP}, {kP}});
  l.push_back({{kB}, {kB}});
  return l;
}

SignatureList transpose_signatures(const Shape& x, int64_t a, int64_t b) {
  SignatureList l;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) l.push_back({{S(i)}, {S(i == a ? b : i == b ? a : i)}});
  l.push_back({{kP}, {kP}});
  l.push_back({{kB}, {kB}});
  return l;
}

GlobalTensor softmax(const GlobalContext& ctx, const GlobalTensor& x) {
  const Shape& xs = x.logical_shape;
  MF_CHECK(!xs.empty(), "global softmax: a scalar input (rank ", ctx.world_rank, ")");
  return apply_global(ctx, "softmax", {x}, {xs}, [&] { return last_axis_signatures(xs, 0); },
                      [](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {mf::softmax(t[0], -1)}; })[0];
}

GlobalTensor layer_norm(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                        const GlobalTensor& bias, double eps) {
  const Shape& xs = x.logical_shape;
  MF_CHECK(!xs.empty() && weight.logical_shape == Shape{xs.back()} && bias.logical_shape == Shape{xs.back()},
           "global layer_norm: x ", shape_str(xs), ", weight ", shape_str(weight.logical_shape), ", bias ",
           shape_str(bias.logical_shape), " (rank ", ctx.world_rank, ")");
  return apply_global(ctx, "layer_norm", {x, weight, bias}, {xs}, [&] { return last_axis_signatures(xs, 2); },
                      [eps](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::layer_norm(t[0], t[1], t[2], eps)};
                      })[0];
}

GlobalTensor sum(const GlobalContext& ctx, const GlobalTensor& x, int64_t axis) {
  const Shape& xs = x.logical_shape;
  const int64_t k = normalize_axis(axis, xs.size(), "sum", ctx.world_rank);
  Shape out = xs;
  out.erase(out.begin() + k);
  return apply_global(ctx, "sum(axis=" + std::to_string(k) + ")", {x}, {out}, [&] { return sum_signatures(xs, k); },
                      [k](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {mf::sum(t[0], {k})}; })[0];
}

GlobalTensor transpose(const GlobalContext& ctx, const GlobalTensor& x, int64_t a, int64_t b) {
  const Shape& xs = x.logical_shape;
  const int64_t i = normalize_axis(a, xs.size(), "transpose", ctx.world_rank);
  const int64_t j = normalize_axis(b, xs.size(), "transpose", ctx.world_rank);
  Shape out = xs;
  std::swap(out[static_cast<size_t>(i)], out[static_cast<size_t>(j)]);
  return apply_global(ctx, "transpose(" + std::to_string(i) + "," + std::to_string(j) + ")", {x}, {out},
                      [&] { return transpose_signatures(xs, i, j); },
                      [i, j](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::contiguous(mf::transpose(t[0], i, j))};
                      })[0];
}

}  // namespace mf::global
