// Global matmul, affine (Conv1D layout, w (in, out)) and linear (w (out, in)): their signature
// lists and output shapes (see global_ops.h for the table).
#include <string>

#include "meshflow/core/error.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

namespace {

Sbp S(int64_t axis) { return Sbp::split(static_cast<int>(axis)); }
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();

int64_t rank_of(const Shape& s) { return static_cast<int64_t>(s.size()); }

// x (..., in) times a weight of `w_in_axis` holding `in`: shared by affine and linear.
SignatureList projection_signatures(const Shape& x, bool has_bias, int64_t w_in_axis) {
  const int64_t last = rank_of(x) - 1, w_out_axis = 1 - w_in_axis;
  auto sig = [&](Sbp xs, Sbp ws, Sbp bs, Sbp out) {
    return has_bias ? Signature{{xs, ws, bs}, {out}} : Signature{{xs, ws}, {out}};
  };
  SignatureList l;
  for (int64_t i = 0; i < last; ++i) l.push_back(sig(S(i), kB, kB, S(i)));  // data parallel
  l.push_back(sig(kB, S(w_out_axis), S(0), S(last)));                         // column parallel
  l.push_back(sig(S(last), S(w_in_axis), kP, kP));                            // row parallel: bias added once
  l.push_back(sig(kP, kB, kP, kP));
  l.push_back(sig(kB, kP, kP, kP));
  l.push_back(sig(kB, kB, kB, kB));
  return l;
}

GlobalTensor projection(const char* name, const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& w,
                        const GlobalTensor& bias, int64_t w_in_axis) {
  const Shape& xs = x.logical_shape;
  const Shape& ws = w.logical_shape;
  const bool has_bias = bias.placement != nullptr;
  MF_CHECK(!xs.empty() && ws.size() == 2 && xs.back() == ws[static_cast<size_t>(w_in_axis)], "global ", name,
           ": x ", shape_str(xs), " and weight ", shape_str(ws), " do not fit (rank ", ctx.world_rank, ")");
  const int64_t n_out = ws[static_cast<size_t>(1 - w_in_axis)];
  MF_CHECK(!has_bias || bias.logical_shape == Shape{n_out}, "global ", name, ": bias ", shape_str(bias.logical_shape),
           " for ", n_out, " outputs (rank ", ctx.world_rank, ")");
  Shape out = xs;
  out.back() = n_out;
  std::vector<GlobalTensor> in{x, w};
  if (has_bias) in.push_back(bias);
  const bool w_in_out = w_in_axis == 0;
  return apply_global(ctx, name, in, {out}, [&] { return projection_signatures(xs, has_bias, w_in_axis); },
                      [&](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        const Tensor b = t.size() == 3 ? t[2] : Tensor();
                        return {w_in_out ? mf::affine(t[0], t[1], b) : mf::linear(t[0], t[1], b)};
                      })[0];
}

}  // namespace

SignatureList matmul_signatures(const Shape& a, const Shape& b) {
  const int64_t na = rank_of(a), nb = rank_of(b);
  MF_CHECK(na >= 2 && (nb == 2 || nb == na), "matmul signatures: a ", shape_str(a), ", b ", shape_str(b));
  SignatureList l;
  for (int64_t i = 0; i < na - 2; ++i) l.push_back({{S(i), nb == na ? S(i) : kB}, {S(i)}});  // batch
  l.push_back({{S(na - 2), kB}, {S(na - 2)}});      // rows of a: data parallel
  l.push_back({{kB, S(nb - 1)}, {S(na - 1)}});      // columns of b: column parallel
  l.push_back({{S(na - 1), S(nb - 2)}, {kP}});      // contraction split: row parallel
  l.push_back({{kP, kB}, {kP}});
  l.push_back({{kB, kP}, {kP}});
  l.push_back({{kB, kB}, {kB}});
  return l;
}

SignatureList affine_signatures(const Shape& x, bool has_bias) { return projection_signatures(x, has_bias, 0); }
SignatureList linear_signatures(const Shape& x, bool has_bias) { return projection_signatures(x, has_bias, 1); }

GlobalTensor matmul(const GlobalContext& ctx, const GlobalTensor& a, const GlobalTensor& b) {
  const Shape& as = a.logical_shape;
  const Shape& bs = b.logical_shape;
  const size_t na = as.size(), nb = bs.size();
  bool ok = na >= 2 && (nb == 2 || nb == na) && as[na - 1] == bs[nb - 2];
  for (size_t i = 0; ok && nb == na && i + 2 < na; ++i) ok = as[i] == bs[i];
  MF_CHECK(ok, "global matmul: a ", shape_str(as), " and b ", shape_str(bs),
           " do not fit (want a (..., m, k), b (..., k, n) with the same batch or b (k, n)) (rank ", ctx.world_rank,
           ")");
  Shape out = as;
  out[na - 1] = bs[nb - 1];
  return apply_global(ctx, "matmul", {a, b}, {out}, [&] { return matmul_signatures(as, bs); },
                      [](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {mf::matmul(t[0], t[1])}; })[0];
}

GlobalTensor affine(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                    const GlobalTensor& bias) {
  return projection(bias.placement ? "affine" : "affine(no bias)", ctx, x, weight, bias, 0);
}

GlobalTensor linear(const GlobalContext& ctx, const GlobalTensor& x, const GlobalTensor& weight,
                    const GlobalTensor& bias) {
  return projection(bias.placement ? "linear" : "linear(no bias)", ctx, x, weight, bias, 1);
}

}  // namespace mf::global
