#include "meshflow/train/gpt_batches.h"

#include <cmath>
#include <tuple>
#include <unordered_map>

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


namespace {
// Entropy (nats/token) of the unigram distribution of the range's tokens, over at most
// `max_tokens` of them (the first documents of the range) so that huge corpora stay cheap.
double unigram_entropy(const IndexedDataset& data, DocumentRange r, int64_t max_tokens = int64_t{1} << 26) {
  std::unordered_map<int32_t, int64_t> counts;
  int64_t n = 0;
  for (int64_t i = r.begin; i < r.end && n < max_tokens; ++i)
    for (int32_t t : data.sequence(i)) {
      ++counts[t];
      ++n;
    }
  double h = 0;
  for (auto& [t, k] : counts) {
    double p = static_cast<double>(k) / static_cast<double>(n);
    h -= p * std::log(p);
  }
  return h;
}
}  // namespace

RunSources causal_lm_data(const RecipeInputs& in) {
  RunSources r;
  auto d = std::make_shared<SplitData>(open_split_data(in.config, /*by_document=*/false));
  const auto datasets = open_train_valid(in, *d, [&](DocumentRange range, uint64_t seed, int64_t samples) {
    return std::make_shared<GptDataset>(*d->indexed, in.seq_length, seed, samples, range);
  });
  const std::shared_ptr<GptDataset> train = datasets.first, valid = datasets.second;
  if (train) r.unigram_entropy = unigram_entropy(*d->indexed, d->train_range);
  const int64_t dp_rank = in.dp_rank, dp = in.dp;
  if (train) r.train = std::make_unique<GptBatchSource>(*train, dp_rank, dp);
  if (valid) r.valid = [valid, dp_rank, dp] { return std::make_unique<GptBatchSource>(*valid, dp_rank, dp); };
  r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
  return r;
}

}  // namespace mf::train
