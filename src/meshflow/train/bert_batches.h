// Micro-batches for the BERT family through a Sampler (the trainer's BatchSources): masked-LM
// pretraining samples (data/bert_dataset.h: sentence pairs or single segments, masked, padded)
// and sequence-classification samples (data/classification_dataset.h). Each sample is a pure
// function of (seed, index), and each data-parallel rank takes its slice of the global
// micro-batch, so the batches are the same under every layout. The sampler position is the state.
#pragma once
#include "meshflow/data/bert_dataset.h"
#include "meshflow/data/classification_dataset.h"
#include "meshflow/data/sampler.h"
#include "meshflow/train/data_recipe.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

class BertBatchSource final : public BatchSource {
 public:
  // `data` must outlive the source. next_sentence: give next_sentence_label (binary head).
  BertBatchSource(const BertDataset& data, int64_t seq_length, bool next_sentence, int64_t rank = 0, int64_t world = 1)
      : data_(data), seq_(seq_length), nsp_(next_sentence), sampler_(data.size(), rank, world) {}
  // input_ids, token_type_ids, attention_mask, labels (B, T); next_sentence_label (B).
  models::Batch next(int64_t micro_batch) override;
  uint64_t position() const override { return sampler_.state(); }
  void set_position(uint64_t pos) override { sampler_.set_state(pos); }

 private:
  const BertDataset& data_;
  int64_t seq_;
  bool nsp_;
  Sampler sampler_;
};

class ClassificationBatchSource final : public BatchSource {
 public:
  // `data` must outlive the source.
  ClassificationBatchSource(const ClassificationDataset& data, int64_t seq_length, int64_t rank = 0, int64_t world = 1)
      : data_(data), seq_(seq_length), sampler_(data.size(), rank, world) {}
  // input_ids, token_type_ids, attention_mask (B, T); labels (B).
  models::Batch next(int64_t micro_batch) override;
  uint64_t position() const override { return sampler_.state(); }
  void set_position(uint64_t pos) override { sampler_.set_state(pos); }

 private:
  const ClassificationDataset& data_;
  int64_t seq_;
  Sampler sampler_;
};

// The masked_lm recipe (data_recipe.h): Megatron's BERT samples from data.data_prefix, split by
// data.splits over documents (sentence-split data); next-sentence labels for bert with
// model.add_binary_head.
RunSources masked_lm_data(const RecipeInputs& in);
// The sequence_classification recipe: jsonl lines of {"text", "label"} from data.train_file and
// data.validation_file; the log line names the held-out set's majority class.
RunSources sequence_classification_data(const RecipeInputs& in);

}  // namespace mf::train
