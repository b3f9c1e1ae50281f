#include "meshflow/parallel/layers.h"

#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"
#include "meshflow/parallel/vocab_parallel.h"
#include "meshflow/nn/mixed_precision.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"

namespace mf::parallel {

namespace {
Tensor local_zeros(const nn::ParamLayout& l, const nn::TensorParallel& tp, DType dt) {
  return zeros(l.local_shape(tp.size(), tp.rank()), dt);
}
}  // namespace

ColumnConv1D::ColumnConv1D(int64_t in, int64_t out, const nn::TensorParallel& tp, int64_t groups, DType dt,
                           SplitUnits units)
    : tp_(tp), groups_(groups) {
  MF_CHECK(groups >= 1 && out % groups == 0, "ColumnConv1D: ", out, " output features do not form ", groups, " groups");
  MF_CHECK(units.features >= 1 && (out / groups) % units.features == 0, "ColumnConv1D: ", out / groups,
           " output features per group are not whole units of ", units.features);
  const int64_t n_units = out / groups / units.features;
  if (units.key)
    MF_CHECK(n_units % tp.size() == 0, "train.dist.tensor_parallel_size ", tp.size(), " must divide ", units.key, " (",
             n_units, ")");
  MF_CHECK(n_units % tp.size() == 0, "ColumnConv1D: ", n_units, " units of ", units.features,
           " output features per group are not divisible by the tensor-parallel size ", tp.size());
  nn::ParamLayout w = groups == 1 ? nn::split_layout({in, out}, 1) : nn::grouped_split_layout({in, out}, {in, groups, out / groups}, 2);
  nn::ParamLayout b = groups == 1 ? nn::split_layout({out}, 0) : nn::grouped_split_layout({out}, {groups, out / groups}, 1);
  weight = register_parameter("weight", local_zeros(w, tp, dt), w);
  bias = register_parameter("bias", local_zeros(b, tp, dt), b);
}

Tensor ColumnConv1D::forward(const Tensor& x, int64_t seq_len) const {
  if (!tp_.enabled() || !tp_.sequence_parallel) return nn::round_to(affine(x, nn::compute(weight), nn::compute(bias)), weight.dtype());
  MF_CHECK(x.ndim() == 3 && seq_len > 0, "ColumnConv1D: sequence parallelism needs x (B, T / tp, in) and the sequence "
           "length, got x ", x.str(), " and ", seq_len);
  Tensor whole = global::box_axis(x, global::Sbp::split(1), global::Sbp::broadcast(), {x.shape(0), seq_len, x.shape(2)},
                                *tp_.comm);  // all-gather the sequence
  return nn::round_to(affine(whole, nn::compute(weight), nn::compute(bias)), weight.dtype());
}

int64_t ColumnConv1D::local_group_start() const {
  const int64_t per_group_local = local_out() / groups_;
  return global::split_start(per_group_local * tp_.size(), tp_.size(), tp_.rank());
}

RowConv1D::RowConv1D(int64_t in, int64_t out, const nn::TensorParallel& tp, DType dt) : tp_(tp) {
  MF_CHECK(in % tp.size() == 0, "RowConv1D: ", in, " input features are not divisible by the tensor-parallel size ",
           tp.size());
  nn::ParamLayout w = nn::split_layout({in, out}, 0);
  weight = register_parameter("weight", local_zeros(w, tp, dt), w);
  bias = register_parameter("bias", zeros({out}, dt));
}

Tensor RowConv1D::forward(const Tensor& x, int64_t seq_len) const {
  // Mixed precision: the f32 partial sums are reduced, then the bias added and the sum rounded.
  const DType storage = weight.dtype();
  if (!tp_.enabled()) return nn::round_to(affine(x, nn::compute(weight), nn::compute(bias)), storage);
  Tensor partial = affine(x, nn::compute(weight));  // P on tp
  if (!tp_.sequence_parallel)
    return nn::round_to(
        add(global::box_axis(partial, global::Sbp::partial_sum(), global::Sbp::broadcast(), partial.shape(), *tp_.comm),
            nn::compute(bias)),
        storage);
  MF_CHECK(partial.ndim() == 3 && partial.shape(1) == seq_len, "RowConv1D: sequence parallelism needs x (B, T, in / tp) "
           "with T the sequence length ", seq_len, ", got x ", x.str());
  return nn::round_to(add(global::box_axis(partial, global::Sbp::partial_sum(), global::Sbp::split(1), partial.shape(), *tp_.comm),
                      nn::compute(bias)),
                  storage);  // reduce-scatter over the sequence
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, const nn::TensorParallel& tp, DType dt)
    : vocab_(vocab), tp_(tp) {
  MF_CHECK(vocab >= tp.size(), "VocabParallelEmbedding: a vocabulary of ", vocab, " cannot be split over ", tp.size(),
           " tensor-parallel ranks");
  nn::ParamLayout w = nn::split_layout({vocab, dim}, 0);
  weight = register_parameter("weight", local_zeros(w, tp, dt), w);
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) const {
  if (!tp_.enabled()) return embedding(nn::compute(weight), ids);
  return parallel::vocab_parallel_embedding(ids, nn::compute(weight), vocab_, *tp_.comm);
}

int64_t VocabParallelEmbedding::max_local_rows() const { return (vocab_ + tp_.size() - 1) / tp_.size(); }

Tensor VocabParallelEmbedding::cross_entropy(const Tensor& logits, const Tensor& labels) const {
  if (!tp_.enabled()) return mf::cross_entropy(logits, labels);
  return parallel::vocab_parallel_cross_entropy(logits, labels, vocab_, *tp_.comm);
}

namespace {
bool sequence_split(const nn::TensorParallel& tp) { return tp.enabled() && tp.sequence_parallel; }
}  // namespace

Tensor scatter_to_sequence_parallel(const Tensor& x, const nn::TensorParallel& tp) {
  if (!sequence_split(tp)) return x;
  return global::box_axis(x, global::Sbp::broadcast(), global::Sbp::split(1), x.shape(), *tp.comm);
}

Tensor gather_from_sequence_parallel(const Tensor& x, int64_t seq_len, const nn::TensorParallel& tp) {
  if (!sequence_split(tp)) return x;
  return global::box_axis(x, global::Sbp::split(1), global::Sbp::broadcast(), {x.shape(0), seq_len, x.shape(2)}, *tp.comm);
}

Tensor sequence_dropout(const Tensor& x, double p, int64_t seq_len, const nn::TensorParallel& tp) {
  if (!sequence_split(tp) || p == 0.0) return dropout(x, p);
  LogicalSlice s = batch_logical_slice(x.shape(), "dropout");
  if (s.whole()) {
    s.logical_shape = x.shape();
    s.start.assign(x.shape().size(), 0);
  }
  s.logical_shape[1] = seq_len;
  s.start[1] = global::split_start(seq_len, tp.size(), tp.rank());
  return dropout(x, p, true, nullptr, s);
}

int64_t sequence_piece_length(int64_t seq_len, const nn::TensorParallel& tp) {
  return sequence_split(tp) ? global::split_size(seq_len, tp.size(), tp.rank()) : seq_len;
}

}  // namespace mf::parallel
