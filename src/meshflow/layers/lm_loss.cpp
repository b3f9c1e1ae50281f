#include "meshflow/layers/lm_loss.h"

#include <algorithm>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/error.h"

namespace mf::layers {

namespace {
// h (n, C) B, w (V, C) S(0) or B, labels (n) i64 on the host, B -> the mean cross-entropy over
// the labels != -100. Mixed precision: bf16/f16 logits (rounded f32 ones on the CPU, stored bf16/f16
// with native half kernels), the loss computed from them in f32 (Megatron's default).
// bias (V) S(0) or B, or without placement: none.
GlobalTensor piece_loss(const GlobalTensor& h, const GlobalTensor& w, const GlobalTensor& bias, const GlobalTensor& labels,
                        DType storage) {
  const GlobalTensor wc = global::map(w, "compute", [](const Tensor& t) { return nn::compute(t); });
  return global::cross_entropy(round_to(global::linear(h, wc, bias), storage), labels);  // logits (n, V)
}
}  // namespace

namespace {
// The mesh axes that split axis 1 of a rank-3 hidden state (the sequence) while the others are B;
// empty when none does (or the SBP is anything else).
std::vector<int> sequence_axes(const GlobalTensor& hidden) {
  std::vector<int> axes;
  if (hidden.logical_shape.size() != 3) return axes;
  const global::NdSbp& sbp = *hidden.nd_sbp;
  for (int m = 0; m < sbp.ndim(); ++m) {
    if (sbp[m].is_broadcast()) continue;
    if (!sbp[m].is_split() || sbp[m].axis != 1) return {};
    axes.push_back(m);
  }
  return axes;
}
}  // namespace

GlobalTensor lm_loss(const GlobalTensor& hidden, const Tensor& labels, const Embedding& table, const LmLossOptions& o) {
  if (const std::vector<int> axes = sequence_axes(hidden); !axes.empty()) {
    // This rank's tokens (B, t, C) and their labels, as a whole tensor of their own: the loss of
    // these rows touches no other rank (the table is B or split over other axes).
    const Shape& hs = hidden.logical_shape;
    MF_CHECK(labels.numel() == hs[0] * hs[1], "lm_loss: labels ", labels.str(), " must label every row of the hidden state ",
             hidden.str());
    const global::Placement& pl = *hidden.placement;
    const LogicalSlice piece = global::local_slice(hs, *hidden.nd_sbp, pl.mesh_shape(),
                                                   global::coordinate_in(pl, global::context_of(&pl).world_rank, "lm_loss"));
    const int64_t t = hidden.local.shape(1);
    Tensor all = contiguous(cast(to(reshape(labels, {hs[0], hs[1]}).detach(), cpu_device()), DType::kI64));  // (B, T)
    Tensor mine = contiguous(narrow(all, 1, piece.start[1], t));                                            // (B, t)
    int64_t valid = 0, mine_valid = 0;
    for (int64_t i = 0; i < all.numel(); ++i) valid += all.data<int64_t>()[i] != -100;
    for (int64_t i = 0; i < mine.numel(); ++i) mine_valid += mine.data<int64_t>()[i] != -100;
    double share = valid > 0 ? static_cast<double>(mine_valid) / static_cast<double>(valid) : 0.0;
    if (mine_valid == 0) {  // no label here: a row's loss times 0 (the head's parameters still in the graph)
      mine.data<int64_t>()[0] = 0;
      share = 0.0;
    }
    const global::NdSbp* whole = global::uniform_sbp(&pl, global::Sbp::broadcast());
    const GlobalTensor rows{&pl, whole, hidden.local.shape(), hidden.local};
    GlobalTensor part = lm_loss(rows, mine, table, o);
    part.local = scale(part.local, share);
    std::vector<global::Sbp> partial = whole->sbps();
    for (int m : axes) partial[static_cast<size_t>(m)] = global::Sbp::partial_sum();
    part.nd_sbp = global::nd_sbp(partial);
    return global::box(part, whole);
  }
  const Shape& hs = hidden.logical_shape;
  MF_CHECK(hs.size() >= 2 && shape_numel(hs) / hs.back() == labels.numel(), "lm_loss: labels ", labels.str(),
           " must label every row of the hidden state ", hidden.str());
  const int64_t C = hs.back();
  // (N, C) B: rows split any other way (a head's picked rows of a split sequence) are gathered.
  const GlobalTensor flat =
      global::box(global::reshape(hidden, {-1, C}), global::uniform_sbp(hidden.placement, global::Sbp::broadcast()));
  const GlobalTensor w = table.stored_table();  // (V, C)
  // The labels on the host (copied there when on a GPU: one synchronisation per step): the chunk
  // counts below read them, and the loss range-checks each chunk's labels on the host and
  // uploads them itself (asynchronously), with no further synchronisation.
  Tensor tgt = contiguous(cast(to(reshape(labels, {-1}).detach(), cpu_device()), DType::kI64));  // (N) i64, host
  auto wrap_labels = [&flat](const Tensor& t) {
    return GlobalTensor{flat.placement, flat.nd_sbp, t.shape(), t};
  };
  // Every rank must cut the same chunks (each chunk's loss may be a collective): rows from the
  // largest piece of the table, not this rank's.
  // Chunks of equal size (within one row): no thin last chunk, whose GEMMs run far below the
  // others' rate (a 25-row tail took 7% of GPT-2 small's loss head).
  const int64_t N = flat.logical_shape[0], most = std::max<int64_t>(1, o.chunk_elements / table.max_local_rows());
  const int64_t num_chunks = (N + most - 1) / most;
  const int64_t rows = num_chunks > 0 ? (N + num_chunks - 1) / num_chunks : most;
  // The weight is an input of the recomputed piece, not captured, so its chunks' gradients reach
  // its .grad through the caller's graph in the same order as without recomputation (and its
  // grad-ready hooks fire once).
  const bool recompute = o.recompute && grad_enabled() && w.local.requires_grad();
  const DType dt = o.storage;
  const GlobalTensor bias = o.bias ? o.bias->value() : GlobalTensor{};
  auto loss_of = [&](const GlobalTensor& h, const Tensor& t) {
    const GlobalTensor lab = wrap_labels(t);
    if (!recompute) return piece_loss(h, w, bias, lab, dt);
    if (!o.bias) {
      auto fn = [lab, dt](const std::vector<GlobalTensor>& in) {
        return std::vector<GlobalTensor>{piece_loss(in[0], in[1], GlobalTensor{}, lab, dt)};
      };
      return global::checkpoint(fn, {h, w})[0];
    }
    auto fn = [lab, dt](const std::vector<GlobalTensor>& in) {
      return std::vector<GlobalTensor>{piece_loss(in[0], in[1], in[2], lab, dt)};
    };
    return global::checkpoint(fn, {h, w, bias})[0];
  };
  if (rows >= N) return loss_of(flat, tgt);
  // Chunks of rows: the mean over all valid labels is the sum of each chunk's mean weighted by
  // its share of them.
  const int64_t* lp = tgt.data<int64_t>();
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) valid += lp[i] != -100;
  auto rows_of = [&flat](int64_t r0, int64_t n) {  // flat is B: its piece is the whole
    return GlobalTensor{flat.placement, flat.nd_sbp, Shape{n, flat.logical_shape[1]}, narrow(flat.local, 0, r0, n)};
  };
  Tensor total;
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    int64_t chunk_valid = 0;
    for (int64_t i = r0; i < r0 + n; ++i) chunk_valid += lp[i] != -100;
    if (chunk_valid == 0) continue;
    Tensor l = scale(loss_of(rows_of(r0, n), narrow(tgt, 0, r0, n)).local,
                     static_cast<double>(chunk_valid) / static_cast<double>(valid));
    total = total.defined() ? add(total, l) : l;
  }
  if (!total.defined()) total = scale(loss_of(rows_of(0, 1), narrow(tgt, 0, 0, 1)).local, 0.0);
  return GlobalTensor{flat.placement, flat.nd_sbp, Shape{}, total};
}

}  // namespace mf::layers
