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

GlobalTensor lm_loss(const GlobalTensor& hidden, const Tensor& labels, const Embedding& table, const LmLossOptions& o) {
  const Shape& hs = hidden.logical_shape;
  MF_CHECK(hs.size() >= 2 && shape_numel(hs) / hs.back() == labels.numel(), "lm_loss: labels ", labels.str(),
           " must label every row of the hidden state ", hidden.str());
  const int64_t C = hs.back();
  const GlobalTensor flat = global::reshape(hidden, {-1, C});  // (N, C)
  MF_CHECK(hidden.nd_sbp == global::uniform_sbp(hidden.placement, global::Sbp::broadcast()),
           "lm_loss: the hidden state ", hidden.str(), " must be B");
  const GlobalTensor w = table.stored_table();  // (V, C)
  // The labels on the host (copied there when on a GPU: one synchronisation per step): the chunk
  // counts below read them, and the loss range-checks each chunk's labels on the host and
  // uploads them itself (asynchronously), with no further synchronisation.
  Tensor tgt = contiguous(cast(to(reshape(labels, {-1}).detach(), cpu_device()), DType::kI64));  // (N) i64, host
  auto wrap_labels = [&hidden](const Tensor& t) {
    return GlobalTensor{hidden.placement, hidden.nd_sbp, t.shape(), t};
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
  return GlobalTensor{hidden.placement, hidden.nd_sbp, Shape{}, total};
}

}  // namespace mf::layers
