// Micro-batches of (ids, labels) from a GptDataset through a Sampler: the trainer's
// BatchSource for language-model pre-training. The sampler position is the source's state.
#pragma once
#include "meshflow/data/gpt_dataset.h"
#include "meshflow/data/sampler.h"
#include "meshflow/train/data_recipe.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

class GptBatchSource final : public BatchSource {
 public:
  // `data` must outlive the source.
  GptBatchSource(const GptDataset& data, int64_t rank = 0, int64_t world = 1)
      : data_(data), sampler_(data.size(), rank, world) {}
  models::Batch next(int64_t micro_batch) override;  // (B, L) ids, (B, L) labels
  uint64_t position() const override { return sampler_.state(); }
  void set_position(uint64_t pos) override { sampler_.set_state(pos); }

 private:
  const GptDataset& data_;
  Sampler sampler_;
  std::vector<int32_t> buf_;
};

// The causal_lm recipe (data_recipe.h): GPT samples of data.seq_length + 1 tokens from
// data.data_prefix, split by data.splits over sequences; the training tokens' unigram entropy as the
// loss's baseline.
RunSources causal_lm_data(const RecipeInputs& in);

}  // namespace mf::train
