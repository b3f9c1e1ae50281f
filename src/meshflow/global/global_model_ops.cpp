// The global ops a model needs beyond algebra: embedding lookup, dropout, attention,
// cross-entropy, elementwise maps and recomputation (see global_ops.h). Where the split makes
// the kernel depend on this rank's piece (the positions dropout draws, the heads attention
// holds, the vocabulary rows), the kernel is told the signature and the mesh coordinate.
#include <string>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/core/error.h"
#include "meshflow/global/global_ops.h"
#include "meshflow/global/ring_attention.h"
#include "meshflow/global/vocab_parallel.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"

namespace mf::global {

namespace {

Sbp S(int64_t axis) { return Sbp::split(static_cast<int>(axis)); }
const Sbp kB = Sbp::broadcast();
const Sbp kP = Sbp::partial_sum();

// The one mesh axis of `sbp` that splits tensor axis `axis`, or -1; throws when several do.
int splitting_mesh_axis(const NdSbp& sbp, int64_t axis, const char* op) {
  int found = -1;
  for (int m = 0; m < sbp.ndim(); ++m)
    if (sbp[m].is_split() && sbp[m].axis == axis) {
      MF_CHECK(found < 0, "global ", op, ": axis ", axis, " split by more than one mesh axis (", sbp.str(), ")");
      found = m;
    }
  return found;
}

// Whether any mesh axis of `sbp` splits tensor axis `axis` (several may: nested pieces).
bool splits(const NdSbp& sbp, int64_t axis) {
  for (const Sbp& s : sbp.sbps())
    if (s.is_split() && s.axis == axis) return true;
  return false;
}

bool any_split(const NdSbp& sbp) {
  for (const Sbp& s : sbp.sbps())
    if (s.is_split()) return true;
  return false;
}

}  // namespace

GlobalTensor embedding(const GlobalTensor& table, const GlobalTensor& ids) {
  const Shape& ts = table.logical_shape;
  const Shape& is = ids.logical_shape;
  MF_CHECK(ts.size() == 2, "global embedding: table ", shape_str(ts), " must be (vocabulary, dim)");
  Shape out = is;
  out.push_back(ts[1]);
  auto candidates = [&] {
    SignatureList l{{{S(0), kB}, {kB}}};  // the vocabulary-split lookup
    for (int64_t k = 0; k < static_cast<int64_t>(is.size()); ++k) l.push_back({{kB, S(k)}, {S(k)}});
    l.push_back({{kB, kB}, {kB}});
    return l;
  };
  const int64_t vocab = ts[0];
  return apply_global(context_of(table.placement), "embedding", {table, ids}, {out}, candidates,
                      [vocab](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        const int m = splitting_mesh_axis(*c.signature.inputs[0], 0, "embedding");
                        if (m < 0) return {mf::embedding(t[0], t[1])};
                        return {vocab_parallel_embedding(t[1], t[0], vocab, *c.ctx.axis_comms[static_cast<size_t>(m)])};
                      })[0];
}

GlobalTensor dropout(const GlobalTensor& x, double p) {
  const Shape& xs = x.logical_shape;
  auto candidates = [&] {
    SignatureList l;
    for (int64_t k = 0; k < static_cast<int64_t>(xs.size()); ++k) l.push_back({{S(k)}, {S(k)}});
    l.push_back({{kP}, {kP}});  // a fixed mask is linear
    l.push_back({{kB}, {kB}});
    return l;
  };
  const Placement* pl = x.placement;
  return apply_global(context_of(pl), "dropout", {x}, {xs}, candidates,
                      [&](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        const NdSbp& sbp = *c.signature.outputs[0];
                        if (p == 0.0 || !any_split(sbp)) return {mf::dropout(t[0], p)};
                        // The piece's logical positions, inside the data-parallel batch slice.
                        LogicalSlice s = local_slice(xs, sbp, pl->mesh_shape(), c.coord);
                        const BatchSlice& b = current_batch_slice();
                        if (b.active()) {
                          // The logical tensor's rows are rows [b.start, + xs[0]) of the batch slice's
                          // batch; a piece of a batch axis split here (T5's sequence parallelism) sits
                          // at its own start inside them.
                          MF_CHECK(b.start + xs[0] <= b.logical_rows, "global dropout: ", x.str(), " starting at batch row ",
                                   b.start, " does not fit in the logical batch of ", b.logical_rows, " rows");
                          s.logical_shape[0] = b.logical_rows;
                          s.start[0] += b.start;
                        }
                        return {mf::dropout(t[0], p, true, nullptr, s)};
                      })[0];
}

GlobalTensor attention(const GlobalTensor& q, const GlobalTensor& k, const GlobalTensor& v,
                       const AttentionOptions& opts) {
  const Shape& qs = q.logical_shape;
  MF_CHECK(qs.size() == 4 && k.logical_shape.size() == 4 && v.logical_shape.size() == 4, "global attention: q ",
           shape_str(qs), ", k ", shape_str(k.logical_shape), ", v ", shape_str(v.logical_shape),
           " must be (batch, heads, seq, head_dim)");
  // The key padding mask: a local (B, Tk) on the device of q; each piece takes its batch rows.
  Tensor mask;
  if (opts.key_padding_mask.defined()) {
    const Tensor& m = opts.key_padding_mask;
    MF_CHECK(m.dtype() == DType::kBool && m.shape() == Shape({qs[0], k.logical_shape[2]}), "global attention: key_padding_mask ",
             m.str(), " must be bool (batch, keys) = (", qs[0], ", ", k.logical_shape[2], ")");
    mask = m.device() == q.local.device() ? m : to(m, q.local.device());
  }
  auto candidates = [] {
    // S(2): the sequence split (context parallelism), attended around the ring of its mesh axis.
    return SignatureList{{{S(0), S(0), S(0)}, {S(0)}}, {{S(1), S(1), S(1)}, {S(1)}}, {{kB, kB, kB}, {kB}},
                         {{S(2), S(2), S(2)}, {S(2)}}};
  };
  const Placement* pl = q.placement;
  return apply_global(context_of(pl), "attention", {q, k, v}, {qs}, candidates,
                      [&](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        AttentionOptions o = opts;
                        const NdSbp& sbp = *c.signature.outputs[0];
                        if (mask.defined()) {  // this piece's batch rows
                          const LogicalSlice s = local_slice(qs, sbp, pl->mesh_shape(), c.coord);
                          o.key_padding_mask = s.start[0] == 0 && t[0].shape(0) == qs[0] ? mask
                                                   : contiguous(narrow(mask, 0, s.start[0], t[0].shape(0)));
                        }
                        if (splits(sbp, 1)) {  // this rank's heads (over tp, and over cp trading the sequence)
                          o.logical_heads = qs[1];
                          o.head_offset = local_slice(qs, sbp, pl->mesh_shape(), c.coord).start[1];
                        }
                        MF_CHECK(o.dropout_p == 0.0 || splitting_mesh_axis(sbp, 0, "attention") < 0,
                                 "global attention: dropout with the batch axis split is not supported (",
                                 sbp.str(), ")");
                        const int ring = splitting_mesh_axis(sbp, 2, "attention");
                        if (ring >= 0) {  // the mask: this piece's batch rows, every key
                          const int64_t ranks = pl->mesh_shape()[static_cast<size_t>(ring)];
                          MF_CHECK(qs[2] % ranks == 0, "global attention: the sequence of ", qs[2],
                                   " positions does not split evenly over the ", ranks,
                                   " ranks of context parallelism (", sbp.str(), "); make it a multiple of ", ranks);
                          return {ring_attention(t[0], t[1], t[2], o, *c.ctx.axis_comms[static_cast<size_t>(ring)])};
                        }
                        return {mf::scaled_dot_product_attention(t[0], t[1], t[2], o)};
                      })[0];
}

GlobalTensor cross_entropy(const GlobalTensor& logits, const GlobalTensor& labels) {
  const Shape& ls = logits.logical_shape;
  MF_CHECK(ls.size() == 2 && labels.logical_shape == Shape{ls[0]}, "global cross_entropy: logits ", shape_str(ls),
           " and labels ", shape_str(labels.logical_shape), " must be (N, V) and (N)");
  auto candidates = [] { return SignatureList{{{S(1), kB}, {kB}}, {{kB, kB}, {kB}}}; };
  const int64_t vocab = ls[1];
  return apply_global(context_of(logits.placement), "cross_entropy", {logits, labels}, {Shape{}}, candidates,
                      [vocab](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        const int m = splitting_mesh_axis(*c.signature.inputs[0], 1, "cross_entropy");
                        if (m < 0) return {mf::cross_entropy(t[0], t[1])};
                        return {vocab_parallel_cross_entropy(t[0], t[1], vocab, *c.ctx.axis_comms[static_cast<size_t>(m)])};
                      })[0];
}

GlobalTensor rope(const GlobalTensor& x, const std::vector<double>& inv_freq) {
  const Shape& xs = x.logical_shape;
  MF_CHECK(xs.size() == 4, "global rope: x ", shape_str(xs), " must be (batch, heads, seq, head_dim)");
  // S(2): a piece of the sequence (context parallelism) rotated by its logical positions.
  auto candidates = [] { return SignatureList{{{S(0)}, {S(0)}}, {{S(1)}, {S(1)}}, {{kB}, {kB}}, {{S(2)}, {S(2)}}}; };
  const Placement* pl = x.placement;
  return apply_global(context_of(pl), "rope", {x}, {xs}, candidates,
                      [&](const std::vector<Tensor>& t, const LocalCall& c) -> std::vector<Tensor> {
                        const NdSbp& sbp = *c.signature.outputs[0];
                        const int64_t start = splitting_mesh_axis(sbp, 2, "rope") >= 0
                                                  ? local_slice(xs, sbp, pl->mesh_shape(), c.coord).start[2]
                                                  : 0;
                        return {mf::rope(t[0], inv_freq, start)};
                      })[0];
}

GlobalTensor rope(const GlobalTensor& x, const std::vector<double>& inv_freq, const std::vector<int64_t>& row_offsets) {
  const Shape& xs = x.logical_shape;
  MF_CHECK(xs.size() == 4, "global rope: x ", shape_str(xs), " must be (batch, heads, seq, head_dim)");
  auto candidates = [] { return SignatureList{{{S(1)}, {S(1)}}, {{kB}, {kB}}}; };  // every row here
  return apply_global(context_of(x.placement), "rope_rows", {x}, {xs}, candidates,
                      [&](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::rope(t[0], inv_freq, row_offsets)};
                      })[0];
}

GlobalTensor rms_norm(const GlobalTensor& x, const GlobalTensor& weight, double eps) {
  const Shape& xs = x.logical_shape;
  MF_CHECK(!xs.empty() && weight.logical_shape == Shape{xs.back()}, "global rms_norm: x ", shape_str(xs), ", weight ",
           shape_str(weight.logical_shape));
  return apply_global(context_of(x.placement), "rms_norm", {x, weight}, {xs}, [&] { return last_axis_signatures(xs, 1); },
                      [eps](const std::vector<Tensor>& t) -> std::vector<Tensor> {
                        return {mf::rms_norm(t[0], t[1], eps)};
                      })[0];
}

GlobalTensor map(const GlobalTensor& x, const char* name, const std::function<Tensor(const Tensor&)>& fn) {
  const Shape& xs = x.logical_shape;
  return apply_global(context_of(x.placement), name, {x}, {xs}, [&] { return unary_signatures(xs, false); },
                      [&fn](const std::vector<Tensor>& t) -> std::vector<Tensor> { return {fn(t[0])}; })[0];
}

std::vector<GlobalTensor> checkpoint(const GlobalFn& fn, const std::vector<GlobalTensor>& inputs) {
  auto outputs = std::make_shared<std::vector<GlobalTensor>>();  // the first run's, without their pieces
  std::vector<GlobalTensor> shells = inputs;
  std::vector<Tensor> locals;
  for (GlobalTensor& g : shells) {
    locals.push_back(g.local);
    g.local = Tensor();
  }
  CheckpointFn local_fn = [fn, shells, outputs](const std::vector<Tensor>& in) {
    std::vector<GlobalTensor> g = shells;
    for (size_t i = 0; i < g.size(); ++i) g[i].local = in[i];
    std::vector<GlobalTensor> out = fn(g);
    std::vector<Tensor> r;
    for (GlobalTensor& o : out) {
      r.push_back(o.local);
      o.local = Tensor();
    }
    if (outputs->empty()) *outputs = std::move(out);
    return r;
  };
  std::vector<Tensor> outs = mf::checkpoint(local_fn, locals);
  std::vector<GlobalTensor> r = *outputs;
  MF_CHECK(r.size() == outs.size(), "global checkpoint: ", outs.size(), " outputs, ", r.size(), " described");
  for (size_t i = 0; i < r.size(); ++i) r[i].local = outs[i];
  return r;
}

}  // namespace mf::global
