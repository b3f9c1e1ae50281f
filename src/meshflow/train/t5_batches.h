// Micro-batches for an encoder-decoder (T5) through a Sampler (the trainer's BatchSource): span-
// corruption samples (data/t5_dataset.h). Each sample is a pure function of (seed, index), and
// each data-parallel rank takes its slice of the global micro-batch, so the batches are the same
// under every layout. The sampler position is the state.
#pragma once
#include "meshflow/data/sampler.h"
#include "meshflow/data/t5_dataset.h"
#include "meshflow/train/data_recipe.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

class T5BatchSource final : public BatchSource {
 public:
  // `data` must outlive the source.
  T5BatchSource(const T5Dataset& data, int64_t rank = 0, int64_t world = 1)
      : data_(data), sampler_(data.size(), rank, world) {}
  // input_ids, attention_mask (B, encoder_length); decoder_input_ids, decoder_attention_mask,
  // labels (B, decoder_length); host i64.
  models::Batch next(int64_t micro_batch) override;
  uint64_t position() const override { return sampler_.state(); }
  void set_position(uint64_t pos) override { sampler_.set_state(pos); }

 private:
  const T5Dataset& data_;
  Sampler sampler_;
};

// The span_corruption recipe (data_recipe.h): T5 span corruption over sentence-split documents of
// data.data_prefix; the encoder reads data.seq_length tokens, the decoder model.decoder_seq_length.
RunSources span_corruption_data(const RecipeInputs& in);

}  // namespace mf::train
