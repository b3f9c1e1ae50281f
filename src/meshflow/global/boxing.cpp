// Boxing: the per-axis conversions (collectives with padding for uneven splits), their
// backward through the dual SBPs, and the N-d plan (see boxing.h).
#include "meshflow/global/boxing.h"

#include <string>
#include <utility>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/core/error.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

namespace {

using comm::Communicator;

Sbp dual(const Sbp& s) {
  if (s.is_broadcast()) return Sbp::partial_sum();
  if (s.is_partial_sum()) return Sbp::broadcast();
  return s;
}

// t with `axis` zero-padded at the end to `len`.
Tensor pad_axis(const Tensor& t, int64_t axis, int64_t len) {
  if (t.shape(axis) == len) return t;
  Shape s = t.shape();
  s[static_cast<size_t>(axis)] = len - s[static_cast<size_t>(axis)];
  return cat({t, zeros(s, t.dtype(), t.device())}, axis);
}

// The permutation bringing `first` to axis 0 (and `second`, if >= 0, to axis 1), then the rest.
std::vector<int64_t> front_perm(int64_t ndim, int64_t first, int64_t second) {
  std::vector<int64_t> p{first};
  if (second >= 0) p.push_back(second);
  for (int64_t d = 0; d < ndim; ++d)
    if (d != first && d != second) p.push_back(d);
  return p;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t d = 0; d < p.size(); ++d) inv[static_cast<size_t>(p[d])] = static_cast<int64_t>(d);
  return inv;
}

Tensor slice_local(const Tensor& x, int64_t k, int64_t n, int p, int r) {
  return contiguous(narrow(x, k, split_start(n, p, r), split_size(n, p, r)));
}

Tensor pad_local(const Tensor& x, int64_t k, const Shape& group_shape, int p, int r) {
  Tensor out = zeros(group_shape, x.dtype(), x.device());
  Tensor dst = narrow(out, k, split_start(group_shape[static_cast<size_t>(k)], p, r), x.shape(k));
  copy_(dst, x);
  return out;
}

Tensor all_reduce_copy(const Tensor& x, Communicator& c) {
  Tensor t = clone(x);
  c.all_reduce(t)->wait();
  return t;
}

// S(k) -> B: every rank's block padded to the largest, gathered, cut and joined.
Tensor gather_split(const Tensor& x, int64_t k, int64_t n, Communicator& c) {
  const int p = c.size();
  const std::vector<int64_t> perm = front_perm(x.ndim(), k, -1);
  const int64_t m = split_size(n, p, 0);
  Tensor xf = contiguous(pad_axis(contiguous(permute(x, perm)), 0, m));
  Shape os = xf.shape();
  os[0] = p * m;
  Tensor out = empty(os, x.dtype(), x.device());
  c.all_gather(xf, out)->wait();
  if (n != p * m) {
    std::vector<Tensor> blocks;
    for (int s = 0; s < p; ++s) blocks.push_back(narrow(out, 0, s * m, split_size(n, p, s)));
    out = cat(blocks, 0);
  }
  return contiguous(permute(out, inverse(perm)));
}

// P -> S(k): the full tensor cut into p blocks padded to the largest, reduce-scattered, cut.
Tensor reduce_split(const Tensor& x, int64_t k, int64_t n, Communicator& c) {
  const int p = c.size();
  const std::vector<int64_t> perm = front_perm(x.ndim(), k, -1);
  const int64_t m = split_size(n, p, 0);
  Tensor xf = contiguous(permute(x, perm));
  if (n != p * m) {
    std::vector<Tensor> blocks;
    for (int s = 0; s < p; ++s) blocks.push_back(pad_axis(narrow(xf, 0, split_start(n, p, s), split_size(n, p, s)), 0, m));
    xf = cat(blocks, 0);
  }
  Shape os = xf.shape();
  os[0] = m;
  Tensor out = empty(os, x.dtype(), x.device());
  c.reduce_scatter(contiguous(xf), out)->wait();
  out = narrow(out, 0, 0, split_size(n, p, c.rank()));
  return contiguous(permute(out, inverse(perm)));
}

// S(i) -> S(j): block s (this rank's rows of tensor axis i, rank s's part of axis j), padded to
// (largest j part, largest i part), goes to rank s; the received blocks are cut and joined on i.
Tensor swap_split(const Tensor& x, int64_t i, int64_t j, const Shape& gs, Communicator& c) {
  const int p = c.size(), r = c.rank();
  const int64_t ni = gs[static_cast<size_t>(i)], nj = gs[static_cast<size_t>(j)];
  const int64_t am = split_size(ni, p, 0), bm = split_size(nj, p, 0);
  const std::vector<int64_t> perm = front_perm(x.ndim(), j, i);
  Tensor xf = contiguous(permute(x, perm));  // (nj, rows of i, rest)
  std::vector<Tensor> blocks;
  for (int s = 0; s < p; ++s)
    blocks.push_back(pad_axis(pad_axis(narrow(xf, 0, split_start(nj, p, s), split_size(nj, p, s)), 0, bm), 1, am));
  Tensor in = contiguous(cat(blocks, 0));
  Tensor out = empty(in.shape(), x.dtype(), x.device());
  c.all_to_all(in, out)->wait();
  std::vector<Tensor> got;
  for (int s = 0; s < p; ++s) got.push_back(narrow(narrow(out, 0, s * bm, split_size(nj, p, r)), 1, 0, split_size(ni, p, s)));
  return contiguous(permute(cat(got, 1), inverse(perm)));
}

Shape piece_shape(const Shape& gs, const Sbp& s, int p, int r) {
  Shape sh = gs;
  if (s.is_split()) sh[static_cast<size_t>(s.axis)] = split_size(gs[static_cast<size_t>(s.axis)], p, r);
  return sh;
}

// The conversion itself, not recorded.
Tensor convert(const Tensor& x, const Sbp& from, const Sbp& to, const Shape& gs, Communicator& c) {
  const int p = c.size(), r = c.rank();
  MF_CHECK(x.shape() == piece_shape(gs, from, p, r), "box ", from.str(), " -> ", to.str(), ": local shape ",
           shape_str(x.shape()), " on rank ", r, " of ", c.group_str(), " but group shape ", shape_str(gs),
           " with ", from.str(), " prescribes ", shape_str(piece_shape(gs, from, p, r)));
  for (const Sbp* s : {&from, &to})
    MF_CHECK(!s->is_split() || s->axis < static_cast<int>(gs.size()), "box ", from.str(), " -> ", to.str(),
             ": split axis out of range for group shape ", shape_str(gs));
  if (from == to) return x;
  if (from.is_partial_sum()) {
    if (to.is_broadcast()) return all_reduce_copy(x, c);
    return reduce_split(x, to.axis, gs[static_cast<size_t>(to.axis)], c);
  }
  if (from.is_split()) {
    if (to.is_broadcast()) return gather_split(x, from.axis, gs[static_cast<size_t>(from.axis)], c);
    if (to.is_split()) return swap_split(x, from.axis, to.axis, gs, c);
    return pad_local(x, from.axis, gs, p, r);
  }
  // from B
  if (to.is_split()) return slice_local(x, to.axis, gs[static_cast<size_t>(to.axis)], p, r);
  return r == 0 ? clone(x) : zeros(x.shape(), x.dtype(), x.device());
}

}  // namespace

Tensor box_axis(const Tensor& x, const Sbp& from, const Sbp& to, const Shape& group_shape, comm::Communicator& comm) {
  if (from == to) return x;
  Tensor out;
  {
    NoGradGuard ng;
    out = convert(x, from, to, group_shape, comm);
  }
  if (out.impl() == x.impl()) out = x.detach();
  Communicator* c = &comm;
  const std::string name = "box " + from.str() + "->" + to.str();
  record(name.c_str(), {x}, {out}, [from, to, group_shape, c](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    NoGradGuard ng;
    return {convert(g[0], dual(to), dual(from), group_shape, *c)};
  });
  return out;
}

std::vector<BoxStep> box_plan(const NdSbp& from, const NdSbp& to) {
  MF_CHECK(from.ndim() == to.ndim(), "box plan ", from.str(), " -> ", to.str(), ": different numbers of mesh axes");
  const int nd = from.ndim();
  // Non-split targets innermost axis first, then split targets outermost axis first.
  std::vector<BoxStep> steps;
  for (int m = nd - 1; m >= 0; --m)
    if (!to[m].is_split() && !(from[m] == to[m])) steps.push_back({m, from[m], to[m]});
  for (int m = 0; m < nd; ++m)
    if (to[m].is_split() && !(from[m] == to[m])) steps.push_back({m, from[m], to[m]});
  std::vector<Sbp> state = from.sbps();
  for (const auto& [m, a, b] : steps) {
    for (const Sbp* s : {&a, &b}) {
      if (!s->is_split()) continue;
      for (int m2 = m + 1; m2 < nd; ++m2)
        MF_CHECK(!(state[static_cast<size_t>(m2)].is_split() && state[static_cast<size_t>(m2)].axis == s->axis),
                 "box plan ", from.str(), " -> ", to.str(), ": not yet supported: mesh axis ", m, " goes ", a.str(),
                 " -> ", b.str(), " while inner mesh axis ", m2, " also splits tensor axis ", s->axis,
                 " (nested splits)");
    }
    state[static_cast<size_t>(m)] = b;
  }
  return steps;
}

bool box_supported(const NdSbp& from, const NdSbp& to) {
  try {
    box_plan(from, to);
    return true;
  } catch (const Error&) {
    return false;
  }
}

GlobalTensor box_to(const GlobalTensor& x, const NdSbp* target, const std::vector<comm::Communicator*>& axis_comms) {
  MF_CHECK(x.placement && x.nd_sbp && target, "box_to: the global tensor and the target need a placement and SBPs");
  const Placement& pl = *x.placement;
  const int nd = pl.ndim();
  const std::string what = x.str() + " to " + target->str();
  MF_CHECK(target->ndim() == nd && x.nd_sbp->ndim() == nd, "box_to ", what, ": needs one Sbp per mesh axis");
  MF_CHECK(static_cast<int>(axis_comms.size()) == nd, "box_to ", what, ": got ", axis_comms.size(),
           " axis communicators for ", nd, " mesh axes");
  std::vector<int64_t> coord(static_cast<size_t>(nd));
  for (int m = 0; m < nd; ++m) {
    const Communicator* c = axis_comms[static_cast<size_t>(m)];
    MF_CHECK(c != nullptr && c->size() == pl.mesh_size(m), "box_to ", what, ": the communicator of mesh axis ", m,
             " must have ", pl.mesh_size(m), " ranks");
    coord[static_cast<size_t>(m)] = c->rank();
  }
  for (int m = 0; m < nd; ++m) {  // each axis communicator spans exactly this rank's line of the mesh
    std::vector<int64_t> q = coord;
    for (int64_t i = 0; i < pl.mesh_size(m); ++i) {
      q[static_cast<size_t>(m)] = i;
      MF_CHECK(pl.rank_at(q) == axis_comms[static_cast<size_t>(m)]->world_ranks()[static_cast<size_t>(i)], "box_to ",
               what, ": the communicator of mesh axis ", m, " (", axis_comms[static_cast<size_t>(m)]->group_str(),
               ") is not this rank's line of the mesh along that axis");
    }
  }
  const Shape have = local_shape(x.logical_shape, *x.nd_sbp, pl.mesh_shape(), coord);
  MF_CHECK(x.local.shape() == have, "box_to ", what, ": local shape ", shape_str(x.local.shape()),
           " at mesh coordinate ", shape_str(coord), ", expected ", shape_str(have));
  if (target == x.nd_sbp) return x;
  check_sbp(x.logical_shape, *target, pl.mesh_shape());

  std::vector<BoxStep> steps;
  try {
    steps = box_plan(*x.nd_sbp, *target);  // validated whole before any communication
  } catch (const Error& e) {
    MF_THROW("box_to ", what, ": ", e.what());
  }

  std::vector<Sbp> state = x.nd_sbp->sbps();
  Tensor t = x.local;
  for (const auto& [m, from, to] : steps) {
    std::vector<Sbp> g = state;
    g[static_cast<size_t>(m)] = Sbp::broadcast();
    const Shape gs = local_shape(x.logical_shape, *nd_sbp(g), pl.mesh_shape(), coord);
    t = box_axis(t, from, to, gs, *axis_comms[static_cast<size_t>(m)]);
    state[static_cast<size_t>(m)] = to;
  }
  return GlobalTensor{x.placement, target, x.logical_shape, t};
}

GlobalTensor box_to(const GlobalTensor& x, const NdSbp* target, comm::Communicator& comm) {
  return box_to(x, target, std::vector<comm::Communicator*>{&comm});
}

}  // namespace mf::global
