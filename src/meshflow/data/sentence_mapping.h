// Megatron's sample mapping over a sentence-split indexed dataset (megatron/legacy/data/
// dataset_utils.py get_samples_mapping, helpers.cpp build_mapping), shared by the BERT and T5
// datasets, and the sequential Philox draws their samples take.
//   The mapping walks the documents of the range in order, epoch after epoch, gathering whole
//   sentences of one document until the target length is reached (max_num_tokens; with
//   probability short_seq_prob a random target in [2, max_num_tokens]) and no fewer than
//   min_sentences sentences stay in the document, or the document ends: each sample is (first
//   sentence, end sentence, target length). Documents with fewer than min_sentences sentences or
//   fewer than min_tokens tokens, or holding a sentence longer than long_sentence_len tokens, give
//   no samples (Megatron skips the first and the last too); a sample of fewer than min_tokens
//   tokens (the end of a document) is dropped. The mapping of all epochs is then shuffled with the
//   seed, and holds num_samples entries (or one epoch's).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/split.h"
#include "meshflow/random/philox.h"

namespace mf {

// Sequential draws from one Philox (key, stream): block after block, two 64-bit values each.
class PhiloxStream {
 public:
  PhiloxStream(uint64_t key, uint64_t stream) : key_(key), stream_(stream) {}
  uint64_t next_u64() {
    if (half_ == 0) block_ = philox_block(key_, stream_, counter_++);
    uint64_t v = (static_cast<uint64_t>(block_.v[2 * half_]) << 32) | block_.v[2 * half_ + 1];
    half_ ^= 1;
    return v;
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  uint64_t below(uint64_t bound) { return next_u64() % bound; }  // bias < bound / 2^64

 private:
  uint64_t key_, stream_, counter_ = 0;
  Philox4x32 block_{};
  int half_ = 0;
};

struct SentenceMappingOptions {
  DocumentRange documents;          // DOCUMENTS (IndexedDataset::document_indices), not sequences
  int64_t max_num_tokens = 0;       // the longest target (>= 2)
  double short_seq_prob = 0.1;
  uint64_t seed = 1234;             // the mapping draws under its own key derived from it
  int64_t num_samples = 0;          // <= 0: one epoch's worth; else as many epochs as needed
  int64_t min_sentences = 1;        // a sample holds at least this many sentences
  int64_t min_tokens = 0;           // a sample holds at least this many tokens
  int64_t long_sentence_len = 512;  // documents holding a longer sentence are skipped; <= 0: none
};

struct SentenceMapping {
  struct Entry {
    int64_t first, end;  // sentences (sequences) [first, end) of one document
    int32_t target;      // target length (tokens) of the sample
  };
  std::vector<Entry> entries;  // shuffled, num_samples of them
  int64_t documents_used = 0, num_epochs = 0, samples_per_epoch = 0;
};

// `who` starts every error ("BertDataset <prefix>"); `hint` ends the one for no usable document.
// Throws mf::Error for a range outside the dataset, max_num_tokens < 2, or no usable document.
SentenceMapping build_sentence_mapping(const IndexedDataset& data, const SentenceMappingOptions& o,
                                       const std::string& who, const std::string& hint = "");

}  // namespace mf
