// The loss head of a language model whose output projection is a (vocabulary-parallel)
// embedding table: logits = h W^T, the cross-entropy against the labels — Megatron's
// parallel_lm_logits + vocab-parallel cross-entropy, LiBai's LMLogits + ParallelCrossEntropyLoss.
// Logits are computed for chunks of rows, so the (N, V) logits of a large vocabulary never exist
// whole when each chunk is recomputed in backward.
#pragma once
#include <memory>

#include "meshflow/parallel/layers.h"

namespace mf::parallel {

struct LmLossOptions {
  // Logits (rows x vocabulary) per chunk at most (at least one row per chunk).
  int64_t chunk_elements = int64_t{1} << 24;
  // Recompute each chunk's logits in backward (full activation checkpointing): the head then
  // holds one chunk's logits and their gradient at a time.
  bool recompute = false;
  // The logits' storage dtype (mixed precision: bf16/f16 logits, the loss computed in f32).
  DType storage = DType::kF32;
};

// hidden (B, T, C) or (N, C), labels of the same rows (-100: ignored) -> the mean cross-entropy of
// logits = hidden · table^T over the labels that count (an f32 scalar under mixed precision).
// `table`: the output embedding (its weight is this rank's vocabulary rows).
Tensor lm_head_loss(const Tensor& hidden, const Tensor& labels, const std::shared_ptr<VocabParallelEmbedding>& table,
                    const LmLossOptions& o);

}  // namespace mf::parallel
