// Global reshape, select and permute: views of the local pieces wherever the split allows (see
// global_ops.h for the signatures).
#include <string>

#include "meshflow/core/error.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

namespace {

Sbp S(int64_t axis) { return Sbp::split(static_cast<int>(axis)); }
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();

std::string dims_str(const std::vector<int64_t>& d) { return shape_str(Shape(d.begin(), d.end())); }

// The shape with its -1 (at most one) resolved to hold `numel` elements.
Shape resolved(const Shape& shape, int64_t numel, const Shape& from) {
  Shape r = shape;
  int64_t known = 1, hole = -1;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] == -1) {
      MF_CHECK(hole < 0, "global reshape: more than one -1 in ", shape_str(shape));
      hole = static_cast<int64_t>(i);
    } else {
      known *= r[i];
    }
  }
  if (hole >= 0 && known > 0) r[static_cast<size_t>(hole)] = numel / known;
  MF_CHECK(shape_numel(r) == numel, "global reshape: ", shape_str(from), " cannot be viewed as ", shape_str(shape));
  return r;
}

// Each rank's piece of the output as the signature prescribes; the local view must hold it.
Tensor reshape_local(const Tensor& t, const Shape& out, const LocalCall& call, const Placement& pl, const char* op) {
  const Shape want = local_shape(out, *call.signature.outputs[0], pl.mesh_shape(), call.coord);
  MF_CHECK(shape_numel(want) == t.numel(), "global ", op, ": the local piece ", t.str(), " cannot be the ",
           call.signature.outputs[0]->str(), " piece ", shape_str(want), " of ", shape_str(out),
           " (the split is uneven across the reshape; rank ", call.ctx.world_rank, ")");
  return mf::reshape(t, want);
}

}  // namespace

GlobalTensor reshape(const GlobalTensor& x, const Shape& shape) {
  const Shape& in = x.logical_shape;
  const Shape out = resolved(shape, shape_numel(in), in);
  // S(k) -> S(j) where axis j of the output starts at the same element stride as axis k and one
  // of the two holds the other whole (k split in the outer part of j, or j in the outer of k),
  // both divisible by the ranks splitting axis k (the product of the mesh axes that split it in
  // x's SBP; when none does, the placement's ranks: even pieces on any of its mesh axes) unless
  // the two axes are the same length.
  const Placement* pl = x.placement;
  auto ranks_splitting = [&](size_t k) {
    int64_t r = 1;
    for (int m = 0; m < x.nd_sbp->ndim(); ++m)
      if ((*x.nd_sbp)[m].is_split() && (*x.nd_sbp)[m].axis == static_cast<int>(k)) r *= pl->mesh_size(m);
    return r > 1 ? r : pl->size();
  };
  auto candidates = [&] {
    SignatureList l;
    int64_t pre_in = 1;
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t pre_out = 1;
      for (size_t j = 0; j < out.size(); ++j) {
        const bool nests = in[k] > 0 && out[j] > 0 && (in[k] % out[j] == 0 || out[j] % in[k] == 0);
        const int64_t ranks = ranks_splitting(k);
        if (pre_out == pre_in && (in[k] == out[j] || (nests && in[k] % ranks == 0 && out[j] % ranks == 0))) {
          l.push_back({{S(static_cast<int64_t>(k))}, {S(static_cast<int64_t>(j))}});
          break;
        }
        pre_out *= out[j];
      }
      pre_in *= in[k];
    }
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  return apply_global(context_of(pl), "reshape" + shape_str(in) + "->" + shape_str(out), {x}, {out}, candidates,
                      [&](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        return {reshape_local(t[0], out, c, *pl, "reshape")};
                      })[0];
}

GlobalTensor expand(const GlobalTensor& x, const Shape& shape) {
  const Shape& in = x.logical_shape;
  MF_CHECK(shape.size() == in.size(), "global expand: ", shape_str(in), " to ", shape_str(shape), " (same rank expected)");
  for (size_t k = 0; k < in.size(); ++k)
    MF_CHECK(in[k] == shape[k] || in[k] == 1, "global expand: axis ", k, " of ", shape_str(in), " cannot become ",
             shape[k]);
  auto candidates = [&] {
    SignatureList l;
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k] == shape[k]) l.push_back({{S(static_cast<int64_t>(k))}, {S(static_cast<int64_t>(k))}});
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  return apply_global(context_of(x.placement), "expand" + shape_str(in) + "->" + shape_str(shape), {x}, {shape},
                      candidates, [&](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        Shape local = t[0].shape();  // the expanded axes are whole on every rank
                        for (size_t k = 0; k < in.size(); ++k)
                          if (in[k] != shape[k]) local[k] = shape[k];
                        return {mf::expand(t[0], local)};
                      })[0];
}

GlobalTensor select(const GlobalTensor& x, int64_t axis, int64_t index) {
  const Shape& in = x.logical_shape;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(in.size()), "global select");
  MF_CHECK(index >= 0 && index < in[static_cast<size_t>(a)], "global select: index ", index, " of axis ", a, " of ",
           shape_str(in));
  Shape out = in;
  out.erase(out.begin() + a);
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k)
      if (k != a) l.push_back({{S(k)}, {S(k < a ? k : k - 1)}});
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  return apply_global(context_of(x.placement), "select(" + std::to_string(a) + ")" + shape_str(in), {x}, {out},
                      candidates, [a, index](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::squeeze(mf::narrow(t[0], a, index, 1), a)};
                      })[0];
}

std::vector<GlobalTensor> unbind(const GlobalTensor& x, int64_t axis) {
  const Shape& in = x.logical_shape;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(in.size()), "global unbind");
  const auto n = static_cast<size_t>(in[static_cast<size_t>(a)]);
  Shape out = in;
  out.erase(out.begin() + a);
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k)
      if (k != a) l.push_back({{S(k)}, std::vector<Sbp>(n, S(k < a ? k : k - 1))});
    l.push_back({{kP}, std::vector<Sbp>(n, kP)});
    l.push_back({{kB}, std::vector<Sbp>(n, kB)});
    return l;
  };
  return apply_global(context_of(x.placement), "unbind(" + std::to_string(a) + ")" + shape_str(in), {x},
                      std::vector<Shape>(n, out), candidates,
                      [a](const std::vector<Tensor>& t) -> std::vector<Tensor> { return mf::unbind(t[0], a); });
}

GlobalTensor index_select(const GlobalTensor& x, int64_t axis, const Tensor& index) {
  const Shape& in = x.logical_shape;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(in.size()), "global index_select");
  MF_CHECK(index.defined() && index.ndim() == 1, "global index_select: index must be 1-D, got ",
           index.defined() ? index.str() : std::string("none"));
  Shape out = in;
  out[static_cast<size_t>(a)] = index.shape(0);
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k)
      if (k != a) l.push_back({{S(k)}, {S(k)}});
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  const Tensor idx = index.device() == x.local.device() ? index : to(index, x.local.device());
  return apply_global(context_of(x.placement),
                      "index_select(" + std::to_string(a) + ", " + std::to_string(index.shape(0)) + ")" + shape_str(in),
                      {x}, {out}, candidates, [a, &idx](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::index_select(t[0], a, idx)};
                      })[0];
}

GlobalTensor narrow(const GlobalTensor& x, int64_t axis, int64_t start, int64_t length) {
  const Shape& in = x.logical_shape;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(in.size()), "global narrow");
  MF_CHECK(start >= 0 && length >= 0 && start + length <= in[static_cast<size_t>(a)], "global narrow: [", start, ", ",
           start + length, ") of axis ", a, " of ", shape_str(in));
  Shape out = in;
  out[static_cast<size_t>(a)] = length;
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k)
      if (k != a) l.push_back({{S(k)}, {S(k)}});
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  return apply_global(context_of(x.placement),
                      "narrow(" + std::to_string(a) + ", " + std::to_string(start) + ", " + std::to_string(length) + ")" +
                          shape_str(in),
                      {x}, {out}, candidates, [a, start, length](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::narrow(t[0], a, start, length)};
                      })[0];
}

GlobalTensor cat(const std::vector<GlobalTensor>& xs, int64_t axis) {
  MF_CHECK(!xs.empty(), "global cat: no inputs");
  const Shape& first = xs[0].logical_shape;
  const int64_t a = normalize_axis(axis, static_cast<int64_t>(first.size()), "global cat");
  Shape out = first;
  out[static_cast<size_t>(a)] = 0;
  std::string key = "cat(" + std::to_string(a) + ")";
  for (const GlobalTensor& x : xs) {
    MF_CHECK(x.logical_shape.size() == first.size(), "global cat: ", shape_str(x.logical_shape), " beside ", shape_str(first));
    for (size_t k = 0; k < first.size(); ++k)
      MF_CHECK(static_cast<int64_t>(k) == a || x.logical_shape[k] == first[k], "global cat: ", shape_str(x.logical_shape),
               " beside ", shape_str(first), " along axis ", a);
    MF_CHECK(x.placement == xs[0].placement, "global cat: inputs on different placements");
    out[static_cast<size_t>(a)] += x.logical_shape[static_cast<size_t>(a)];
    key += shape_str(x.logical_shape);
  }
  const size_t n = xs.size();
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(first.size()); ++k)
      if (k != a) l.push_back({std::vector<Sbp>(n, S(k)), {S(k)}});
    l.push_back({std::vector<Sbp>(n, kP), {kP}});
    l.push_back({std::vector<Sbp>(n, kB), {kB}});
    return l;
  };
  return apply_global(context_of(xs[0].placement), key, xs, {out}, candidates,
                      [a](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {mf::cat(t, a)}; })[0];
}

GlobalTensor permute(const GlobalTensor& x, const std::vector<int64_t>& dims) {
  const Shape& in = x.logical_shape;
  MF_CHECK(dims.size() == in.size(), "global permute: dims ", dims_str(dims), " for ", shape_str(in));
  Shape out(in.size());
  for (size_t j = 0; j < dims.size(); ++j) {
    MF_CHECK(dims[j] >= 0 && dims[j] < static_cast<int64_t>(in.size()), "global permute: dims ", dims_str(dims),
             " for ", shape_str(in));
    out[j] = in[static_cast<size_t>(dims[j])];
  }
  auto candidates = [&] {
    SignatureList l;
    for (size_t j = 0; j < dims.size(); ++j) l.push_back({{S(dims[j])}, {S(static_cast<int64_t>(j))}});
    l.push_back({{kP}, {kP}});
    l.push_back({{kB}, {kB}});
    return l;
  };
  return apply_global(context_of(x.placement), "permute" + dims_str(dims), {x}, {out}, candidates,
                      [&dims](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {mf::permute(t[0], dims)}; })[0];
}

}  // namespace mf::global
