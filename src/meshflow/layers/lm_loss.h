// The loss head of a language model whose output projection is an embedding table (tied
// weights): logits = h W^T, then the cross-entropy against the labels (LiBai's LMLogits +
// ParallelCrossEntropyLoss). With the table's rows split (the vocabulary), the logits come out
// S(1) and the cross-entropy op runs the vocabulary-split cross-entropy: no rank ever holds the
// whole vocabulary axis. Logits are computed for chunks of rows, so the (N, V) logits of a large
// vocabulary never exist whole when each chunk is recomputed in backward.
#pragma once
#include "meshflow/layers/layers.h"

namespace mf::layers {

struct LmLossOptions {
  // Logits (rows x vocabulary) per chunk at most (at least one row per chunk).
  int64_t chunk_elements = int64_t{1} << 24;
  // Recompute each chunk's logits in backward (full activation checkpointing): the head then
  // holds one chunk's logits and their gradient at a time.
  bool recompute = false;
  // The logits' storage dtype (mixed precision: bf16/f16 logits, the loss computed in f32).
  DType storage = DType::kF32;
  // A bias added to the logits (BERT's masked-LM head), split like the table; null: none.
  const RowBias* bias = nullptr;
};

// hidden (B, T, C) or (N, C) B (another split is gathered first), labels (B, T) or (N) of the same rows (-100: ignored; a local
// tensor, anywhere) -> the mean cross-entropy () B of logits = hidden · table^T over the labels
// that count (an f32 scalar under mixed precision). hidden (B, T, C) may also be S(1) on mesh
// axes where it is B on the others (the sequence split: context parallelism; labels whole): each
// rank then computes its own tokens' share of the mean (its tokens' mean x their share of the
// labels that count), a P that one all-reduce of the scalar makes B — no rank projects another's
// tokens.
GlobalTensor lm_loss(const GlobalTensor& hidden, const Tensor& labels, const Embedding& table, const LmLossOptions& o);

}  // namespace mf::layers
