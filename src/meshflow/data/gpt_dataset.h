// GPT pre-training samples, Megatron-style. The documents of a range are concatenated into one
// token stream — epoch after epoch, each epoch in its own seeded shuffled document order, as
// many epochs as `num_samples` needs — and sample j is the stream's tokens
// [j*L, j*L + L + 1): L + 1 tokens (inputs = [:-1], labels = [1:]) that cross document
// boundaries freely (documents end with the eod token when preprocessed with it). The order of
// the samples is then shuffled with the seed: sample(i) returns stream sample shuffle[i].
// A document is a sequence of the IndexedDataset (our builder writes one per document).
// Unlike Megatron, the final epoch is shuffled with the others (no separate last epoch) and
// the index is built in memory, not cached on disk.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/split.h"

namespace mf {

class GptDataset {
 public:
  // num_samples <= 0: one epoch's worth, (tokens in the range - 1) / seq_length. Keeps a
  // reference to `data`, which must outlive the dataset. Throws when the range is empty or
  // out of bounds, or holds fewer than seq_length + 1 tokens.
  GptDataset(const IndexedDataset& data, int64_t seq_length, uint64_t seed, int64_t num_samples,
             DocumentRange documents);

  int64_t size() const { return num_samples_; }
  int64_t seq_length() const { return seq_length_; }
  int64_t num_epochs() const { return num_epochs_; }
  int64_t tokens_per_epoch() const { return tokens_per_epoch_; }

  // seq_length + 1 tokens of sample i (0 <= i < size()).
  std::vector<int32_t> sample(int64_t i) const;
  void sample_into(int64_t i, std::vector<int32_t>& out) const;  // replaces out's contents

 private:
  struct Start {
    int64_t doc_pos;  // position in doc_order_
    int64_t offset;   // token offset inside that document
  };
  const IndexedDataset& data_;
  int64_t seq_length_, num_samples_, num_epochs_ = 0, tokens_per_epoch_ = 0;
  std::vector<int64_t> doc_order_;  // sequence indices, all epochs
  std::vector<Start> starts_;       // start of stream sample j
  std::vector<int64_t> shuffle_;    // sample(i) = stream sample shuffle_[i]
};

}  // namespace mf
