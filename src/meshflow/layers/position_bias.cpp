#include "meshflow/layers/position_bias.h"

#include <algorithm>
#include <cmath>

namespace mf::layers {

Tensor relative_position_buckets(int64_t tq, int64_t tk, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  Tensor out = empty({tq, tk}, DType::kI64);
  int64_t* p = out.data<int64_t>();
  const int64_t nb = bidirectional ? num_buckets / 2 : num_buckets, max_exact = nb / 2;
  // Hugging Face computes the logarithmic buckets in float32; so does this, to land in the same ones.
  const float log_span = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) {
      const int64_t rel = j - i;  // memory position - query position
      int64_t bucket = 0, n = 0;
      if (bidirectional) {
        bucket = rel > 0 ? nb : 0;
        n = rel < 0 ? -rel : rel;
      } else {
        n = rel < 0 ? -rel : 0;
      }
      if (n < max_exact) {
        bucket += n;
      } else {
        const float v = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) / log_span *
                        static_cast<float>(nb - max_exact);
        bucket += std::min<int64_t>(nb - 1, max_exact + static_cast<int64_t>(v));
      }
      p[i * tk + j] = bucket;
    }
  return out;
}

GlobalTensor relative_position_bias(const Embedding& table, int64_t tq, int64_t tk, bool bidirectional,
                                    int64_t max_distance, const GlobalTensor& like) {
  const Tensor buckets = relative_position_buckets(tq, tk, bidirectional, table.num(), max_distance);
  const GlobalTensor b = table.forward(global::broadcast_beside(like, buckets));  // (Tq, Tk, H)
  return global::permute(b, {2, 0, 1});                                       // (H, Tq, Tk)
}

}  // namespace mf::layers
