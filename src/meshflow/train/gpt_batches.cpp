#include "meshflow/train/gpt_batches.h"

namespace mf::train {

models::Batch GptBatchSource::next(int64_t micro_batch) {
  std::vector<int64_t> idx = sampler_.next_batch(micro_batch);
  int64_t L = data_.seq_length();
  Tensor ids = empty({micro_batch, L}, DType::kI64), labels = empty({micro_batch, L}, DType::kI64);
  int64_t* pi = ids.data<int64_t>();
  int64_t* pl = labels.data<int64_t>();
  for (int64_t b = 0; b < micro_batch; ++b) {
    data_.sample_into(idx[static_cast<size_t>(b)], buf_);
    for (int64_t t = 0; t < L; ++t) {
      pi[b * L + t] = buf_[static_cast<size_t>(t)];
      pl[b * L + t] = buf_[static_cast<size_t>(t + 1)];
    }
  }
  return {ids, labels};
}

}  // namespace mf::train
