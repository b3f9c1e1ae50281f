// Vocabulary parallelism (Megatron's VocabParallelEmbedding and vocab-parallel cross-entropy) in
// SBP terms, on the tensor-parallel communicator `tp` (p ranks, r = tp.rank()). The vocabulary
// axis is split S(0) for the embedding weight and S(1) for the logits, with sbp.h's uneven rule:
// rank r holds ids [split_start(vocab, p, r), +split_size(vocab, p, r)). Neither op ever builds
// a tensor with a full vocabulary axis; per-rank memory is O(rows x vocab / p).
//
// Gradients follow boxing.h: a local gradient is the exact partial derivative of the SUM of all
// ranks' local losses, so a loss repeated on every rank must be divided by p (or computed on one
// rank) before backward.
//
// Collective: every rank of `tp` must call these with the same ids / targets (B over tp), the same
// vocab_size and ignore_index, in the same order, agree on whether grad is recorded, and run
// backward through them; `tp` must outlive the backward pass. GPU tensors are computed on the host
// (copied there and back; correct, not fast).
#pragma once
#include <cstdint>

#include "meshflow/comm/communicator.h"
#include "meshflow/tensor/tensor.h"

namespace mf::global {

// ids (...) i32/i64 in [0, vocab_size), weight_shard (V_r, dim) f32/f64 = this rank's rows of the
// logical (vocab_size, dim) embedding -> (..., dim), identical on every rank (B).
// Forward: local lookup of the ids this rank owns (zero rows for the rest) = P, then P -> B
// (one all_reduce). Backward: B -> P (one all_reduce of the arriving gradient), then the local
// lookup's scatter-add into weight_shard's rows.
Tensor vocab_parallel_embedding(const Tensor& ids, const Tensor& weight_shard, int64_t vocab_size,
                                comm::Communicator& tp);

// logits_shard (N, V_r) f32/f64 = this rank's columns of the logical (N, vocab_size) logits,
// targets (N) i32/i64 in [0, vocab_size) or ignore_index -> the mean loss over non-ignored rows,
// shape (), identical on every rank (as mf::cross_entropy on the full logits; 0 when all rows
// are ignored). Forward: the fused cross-entropy kernel's local log-sum-exp per row, then 2
// all_reduces — kMax of those (N), then kSum of exp(lse_r - max) and the target logits
// together (2N). Backward: 1 all_reduce of the scalar upstream gradient (summed over ranks), then
// the fused backward kernel: dlogits_shard = G * (softmax_shard - onehot_shard) / count.
Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const Tensor& targets, int64_t vocab_size,
                                    comm::Communicator& tp, int64_t ignore_index = -100);

}  // namespace mf::global
