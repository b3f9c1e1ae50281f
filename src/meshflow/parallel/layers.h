// Tensor-parallel layers (Megatron's, as SBP annotations; see tensor_parallel.h). On one rank
// (tp.size() == 1) each is exactly its plain layer, so one model code serves every layout.
//
//   ColumnConv1D  y = x W + b, W (in, out) split S(1) on its output features (in `groups` equal
//                 column blocks, each split: GPT-2's fused q|k|v), b split alike. x is B on tp
//                 (replicated), y comes out S(-1): this rank's output features.
//   RowConv1D     y = x W + b, W (in, out) split S(0) on its input features; x is S(-1) (the
//                 matching column layer's output), x W is P (a partial sum) and is boxed to B —
//                 one all-reduce forward, and its dual, one all-reduce, backward — then b (B).
//   VocabParallelEmbedding  the (vocab, dim) table split S(0) over tp (uneven allowed); the
//                 lookup is P, all-reduced to B.
// Sequence parallelism (tp.sequence_parallel): activations outside the column -> row pairs are
// S(1), split on the sequence axis (uneven allowed). The column layer then all-gathers its input
// to B first (backward: reduce-scatter) and the row layer reduce-scatters its P output to S(1)
// instead of all-reducing it (backward: all-gather) — Megatron-LM's sequence parallelism. Both
// take the logical sequence length for it.
// Gradients follow boxing's rule (boxing.h): a local gradient is the partial derivative of the
// sum of all tp ranks' losses, so a loss replicated on the tp ranks is divided by tp, and the
// gradients of replicated (B) parameters are partial sums, to be summed over tp.
// Mixed precision (bf16/f16 parameters, nn/mixed_precision.h): weights are cast to f32 for the
// GEMM and each output is rounded to the parameter dtype — the row layer's after its f32 partial
// sums are reduced and the bias added.
#pragma once
#include "meshflow/nn/module.h"

namespace mf::parallel {

// The output features of a column-parallel layer split over tp in whole units of `features`
// (attention heads of head_dim features), which the model config counts as `key` (named in the
// error when tp does not divide them).
struct SplitUnits {
  int64_t features = 1;
  const char* key = nullptr;
};

class ColumnConv1D : public nn::Module {
 public:
  ColumnConv1D(int64_t in, int64_t out, const nn::TensorParallel& tp, int64_t groups = 1, DType dt = DType::kF32,
               SplitUnits units = {});
  // x (B, T, in) B -> (B, T, out / tp) S(-1); sequence parallel: x (B, T / tp, in) S(1).
  Tensor forward(const Tensor& x, int64_t seq_len = 0) const;
  int64_t local_out() const { return weight.shape(1); }
  // Where this rank's features start within each group of the logical output (0 on one rank).
  int64_t local_group_start() const;
  Tensor weight, bias;

 private:
  nn::TensorParallel tp_;
  int64_t groups_ = 1;
};

class RowConv1D : public nn::Module {
 public:
  RowConv1D(int64_t in, int64_t out, const nn::TensorParallel& tp, DType dt = DType::kF32);
  // x (B, T, in / tp) S(-1) -> (B, T, out) B; sequence parallel: -> (B, T / tp, out) S(1).
  Tensor forward(const Tensor& x, int64_t seq_len = 0) const;
  Tensor weight, bias;

 private:
  nn::TensorParallel tp_;
};

class VocabParallelEmbedding : public nn::Module {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t dim, const nn::TensorParallel& tp, DType dt = DType::kF32);
  Tensor forward(const Tensor& ids) const;  // ids (...) logical ids -> (..., dim) B
  int64_t vocab_size() const { return vocab_; }
  // The most rows any rank holds (ceil(vocab / tp)): chunk sizes every rank agrees on.
  int64_t max_local_rows() const;
  // Logits (n, vocab / tp) of this rank's vocabulary columns, labels (n) i64 on the host ->
  // the mean cross-entropy over labels != -100 of the logical (n, vocab) logits (the
  // vocabulary-parallel cross-entropy across the ranks).
  Tensor cross_entropy(const Tensor& logits, const Tensor& labels) const;
  Tensor weight;  // this rank's rows

 private:
  int64_t vocab_;
  nn::TensorParallel tp_;
};

// Sequence parallelism's edges and pieces. Each is the plain operation (identity, dropout, the
// whole length) unless tp.sequence_parallel splits the sequence axis over more than one rank.
//   scatter_to_sequence_parallel: (B, T, C) B -> this rank's (B, T / tp, C) S(1) piece (a local
//       slice; backward all-gathers).
//   gather_from_sequence_parallel: the S(1) piece of a (B, seq_len, C) activation -> B
//       (all-gather; backward takes this rank's slice of the gradient).
//   sequence_dropout: dropout of an activation (a piece under sequence parallelism) that draws
//       the numbers of its logical positions (and of the data-parallel batch slice).
//   sequence_piece_length: this rank's positions of a sequence of seq_len.
Tensor scatter_to_sequence_parallel(const Tensor& x, const nn::TensorParallel& tp);
Tensor gather_from_sequence_parallel(const Tensor& x, int64_t seq_len, const nn::TensorParallel& tp);
Tensor sequence_dropout(const Tensor& x, double p, int64_t seq_len, const nn::TensorParallel& tp);
int64_t sequence_piece_length(int64_t seq_len, const nn::TensorParallel& tp);
// The logical sequence length of an activation (B, t, C): seq_len under sequence parallelism,
// else t.
inline int64_t logical_sequence_length(const Tensor& x, int64_t seq_len, const nn::TensorParallel& tp) {
  return tp.enabled() && tp.sequence_parallel ? seq_len : x.shape(1);
}

}  // namespace mf::parallel
