// Ring attention: exact attention over a sequence split across the ranks of one group (context
// parallelism, the S(seq) signature of global::attention). Rank r holds chunk r of the queries,
// keys and values (contiguous, equal chunks). The key/value chunks travel around the ring (rank r
// sends to r + 1, receives from r - 1, the next transfer posted before the current chunk's
// compute); each visiting chunk's block of attention is computed by the fused kernel with the
// chunk's place in the sequence (the causal diagonal, the sliding window, the dropout draws of its
// logical scores), and the blocks are merged with the log-sum-exp rule:
//   lse = log(exp(lse_a) + exp(lse_b)),  out = out_a exp(lse_a - lse) + out_b exp(lse_b - lse).
// Backward runs the same ring with the merged output and lse (so each block's gradient is its
// exact share): dq accumulates here, and each chunk's dk/dv accumulator travels with it and
// returns to its owner after the last rank's turn. Chunks a causal mask (or window) hides entirely
// are skipped.
#pragma once
#include "meshflow/comm/communicator.h"
#include "meshflow/ops/ops.h"

namespace mf::global {

// q, k, v (B, H, c, D): chunk ring.rank() of ring.size() of the logical sequence (every rank's c
// equal) -> out (B, H, c, D). opts as scaled_dot_product_attention's; key_padding_mask, when
// given, is (B, c * ring.size()), the logical keys. CPU, f32/f64. Collective over `ring`.
Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts,
                      comm::Communicator& ring);

}  // namespace mf::global
