// Random token batches for benchmarks and tests: row r of the stream is a function of
// (seed, r) only (Philox), labels are the ids shifted by one. No files needed.
#pragma once
#include "meshflow/train/trainer.h"

namespace mf::train {

class SyntheticBatchSource final : public BatchSource {
 public:
  SyntheticBatchSource(int64_t vocab_size, int64_t seq_length, uint64_t seed = 1)
      : vocab_(vocab_size), seq_(seq_length), seed_(seed) {}
  models::Batch next(int64_t micro_batch) override;  // (B, T) ids, labels
  uint64_t position() const override { return pos_; }
  void set_position(uint64_t pos) override { pos_ = pos; }

 private:
  int64_t vocab_, seq_;
  uint64_t seed_, pos_ = 0;
};

}  // namespace mf::train
