#include "meshflow/train/synthetic_batches.h"

#include "meshflow/random/philox.h"

namespace mf::train {

models::Batch SyntheticBatchSource::next(int64_t micro_batch) {
  Tensor ids = empty({micro_batch, seq_}, DType::kI64), labels = empty({micro_batch, seq_}, DType::kI64);
  int64_t* pi = ids.data<int64_t>();
  int64_t* pl = labels.data<int64_t>();
  for (int64_t b = 0; b < micro_batch; ++b, ++pos_) {
    auto token = [&](int64_t t) {
      return static_cast<int64_t>(philox_uniform(seed_, pos_, static_cast<uint64_t>(t)) * static_cast<double>(vocab_)) %
             vocab_;
    };
    for (int64_t t = 0; t < seq_; ++t) {
      pi[b * seq_ + t] = token(t);
      pl[b * seq_ + t] = token(t + 1);
    }
  }
  return {ids, labels};
}

}  // namespace mf::train
