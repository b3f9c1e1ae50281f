#include "meshflow/parallel/lm_head.h"

#include <algorithm>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/nn/mixed_precision.h"
#include "meshflow/ops/ops.h"

namespace mf::parallel {

namespace {
// h (n, C), w (V / tp, C), labels (n) i64 on the host -> the mean cross-entropy over this
// piece's labels != -100. Mixed precision: bf16/f16 logits (rounded f32 ones on the CPU, stored
// bf16/f16 with native half kernels), the loss computed from them in f32 (Megatron's default).
Tensor piece_loss(const Tensor& h, const Tensor& w, const Tensor& labels, const VocabParallelEmbedding& table,
                  DType storage) {
  Tensor lg = nn::round_to(linear(h, nn::compute(w)), storage);  // (n, V / tp)
  return table.cross_entropy(lg, labels);
}
}  // namespace

Tensor lm_head_loss(const Tensor& hidden, const Tensor& labels, const std::shared_ptr<VocabParallelEmbedding>& table,
                    const LmLossOptions& o) {
  MF_CHECK(hidden.ndim() >= 2 && hidden.numel() / hidden.shape(-1) == labels.numel(), "lm_head_loss: labels ",
           labels.str(), " must label every row of the hidden state ", hidden.str());
  const Tensor& w = table->weight;  // (V / tp, C)
  Tensor flat = reshape(hidden, {-1, hidden.shape(-1)});  // (N, C)
  // The labels on the host (copied there when on a GPU: one synchronisation per step): the chunk
  // counts below read them, and the loss range-checks each chunk's labels on the host and
  // uploads them itself (asynchronously), with no further synchronisation.
  Tensor tgt = contiguous(cast(to(reshape(labels, {-1}).detach(), cpu_device()), DType::kI64));  // (N) i64, host
  // Every rank must cut the same chunks (each chunk's loss may be a collective): rows from the
  // largest shard of the vocabulary, not this rank's.
  const int64_t N = flat.shape(0), rows = std::max<int64_t>(1, o.chunk_elements / table->max_local_rows());
  // The weight is an input of the recomputed piece, not captured, so its chunks' gradients reach
  // its .grad through the caller's graph in the same order as without recomputation (and its
  // grad-ready hooks fire once).
  const bool recompute = o.recompute && grad_enabled() && w.requires_grad();
  const DType dt = o.storage;
  auto loss_of = [&](const Tensor& h, const Tensor& t) {
    if (!recompute) return piece_loss(h, w, t, *table, dt);
    auto fn = [t, table, dt](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{piece_loss(in[0], in[1], t, *table, dt)};
    };
    return checkpoint(fn, {h, w})[0];
  };
  if (rows >= N) return loss_of(flat, tgt);
  // Chunks of rows: the mean over all valid labels is the sum of each chunk's mean weighted by
  // its share of them.
  const int64_t* lp = tgt.data<int64_t>();
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) valid += lp[i] != -100;
  Tensor total;
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    int64_t chunk_valid = 0;
    for (int64_t i = r0; i < r0 + n; ++i) chunk_valid += lp[i] != -100;
    if (chunk_valid == 0) continue;
    Tensor l = scale(loss_of(narrow(flat, 0, r0, n), narrow(tgt, 0, r0, n)),
                     static_cast<double>(chunk_valid) / static_cast<double>(valid));
    total = total.defined() ? add(total, l) : l;
  }
  return total.defined() ? total : scale(loss_of(narrow(flat, 0, 0, 1), narrow(tgt, 0, 0, 1)), 0.0);
}

}  // namespace mf::parallel
