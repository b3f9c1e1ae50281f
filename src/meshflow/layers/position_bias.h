// T5's relative position bias: each (query, key) distance falls in one of `num_buckets` buckets
// (exact for small distances, logarithmic up to `max_distance`; signed when bidirectional), and a
// (num_buckets, H) table holds each bucket's bias per head. The bias (H, Tq, Tk) is added to the
// attention scores (layers/attention.h: AttentionInputs::bias), its gradient reaching the table.
#pragma once
#include <cstdint>

#include "meshflow/layers/layers.h"

namespace mf::layers {

// The buckets of every (query i, key j) distance j - i, as Hugging Face's
// _relative_position_bucket computes them (its float32 logarithm included): (Tq, Tk) i64 on the
// host.
Tensor relative_position_buckets(int64_t tq, int64_t tk, bool bidirectional, int64_t num_buckets, int64_t max_distance);

// table (num_buckets, H), B -> the bias (H, Tq, Tk) on `like`'s placement.
GlobalTensor relative_position_bias(const Embedding& table, int64_t tq, int64_t tk, bool bidirectional,
                                    int64_t max_distance, const GlobalTensor& like);

}  // namespace mf::layers
