// A layer's key/value cache for decoding (infer/engine.h): this rank's pieces of the keys and
// values of every position so far, preallocated for the whole sequence and filled position by
// position; attention reads the filled prefix as a view, never a copy. Split like the keys and
// values it caches (by heads over the ranks splitting the layer, or whole when they are).
#pragma once
#include <utility>
#include <vector>

#include "meshflow/global/global_ops.h"

namespace mf::layers {

using global::GlobalTensor;

struct KvCache {
  Tensor k, v;  // local (B, heads here, capacity, D); undefined until the first append
};

// Writes k and v (B, H, T, D) (global, one SBP) at positions [past, past + T) of `cache`
// (allocated with `capacity` positions on first use) and returns the keys and values of positions
// [0, past + T) with k's placement and SBP. Throws when they do not fit or change shape.
std::pair<GlobalTensor, GlobalTensor> append_kv(KvCache& cache, const GlobalTensor& k, const GlobalTensor& v,
                                                int64_t past, int64_t capacity);

// What decoding gives one attention layer: its cache, the positions already in it, and each
// row's first new position (the rotary embedding's per-row offsets).
struct LayerDecode {
  KvCache* cache = nullptr;
  int64_t past = 0, capacity = 0;
  const std::vector<int64_t>* row_offsets = nullptr;  // (B), the decode state's
  // The keys and values of every position so far, this call's k, v (B, H, T, D) appended.
  std::pair<GlobalTensor, GlobalTensor> attend(const GlobalTensor& k, const GlobalTensor& v) const {
    return append_kv(*cache, k, v, past, capacity);
  }
};

}  // namespace mf::layers
