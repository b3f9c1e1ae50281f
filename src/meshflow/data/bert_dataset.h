// BERT pre-training samples, Megatron-LM's way (megatron/legacy/data/bert_dataset.py,
// dataset_utils.py, and helpers.cpp build_mapping), over an indexed dataset of one sequence per
// sentence (`meshflow preprocess --split-sentences`).
//   The sample mapping is Megatron's (sentence_mapping.h): whole sentences of one document up to
//   a target length (max_num_tokens = seq_length - 3 with the binary head, - 2 without; shorter
//   with probability short_seq_prob), at least as many sentences as the head needs (2 / 1);
//   documents with fewer, or holding a sentence longer than long_sentence_len tokens, give no
//   samples. size() is num_samples (or one epoch's samples).
//   Sample i draws from Philox under (seed, stream i) only, so it is a pure function of
//   (data, options, i): the split of its sentences into A and B (a_end in [1, n-1]), swapping
//   them with probability 1/2 (next_sentence_label 1), truncation of the longer segment from its
//   front or back at random until A + B fits the target, then [CLS] A [SEP] B [SEP] (token types
//   0 up to the first [SEP], 1 after), and masking: num_to_predict = min(ceil(masked_lm_prob *
//   target), max(1, round(masked_lm_prob * tokens))), candidates = every token but [CLS]/[SEP],
//   grouped into whole words when whole_word_masking ("##" pieces join the token before),
//   shuffled and taken while the budget allows (a word that does not fit is skipped); each
//   chosen token becomes [MASK] (80%), stays (10%) or a random id in [0, vocab_size) (10%).
// Unlike Megatron: Philox instead of numpy's RandomState and mt19937 (same distributions, other
// numbers); whole words, not Megatron's n-grams of up to 3 words (its max_ngrams default), are
// the masking unit (Google BERT's rule); the mapping is built in memory, not cached on disk.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/sentence_mapping.h"
#include "meshflow/data/split.h"
#include "meshflow/data/tokenizer.h"

namespace mf {

struct BertSpecialTokens {
  int32_t cls = -1, sep = -1, mask = -1, pad = -1;
  int64_t vocab_size = 0;
  std::vector<bool> continues_word;  // id -> the token continues a word (WordPiece "##..."): whole-word masking groups it with the previous token
};

// From a tokenizer: [CLS] [SEP] [MASK] [PAD] (BERT's WordPiece) or <s> </s> <mask> <pad>
// (RoBERTa's BPE); throws mf::Error naming the tokenizer and the missing token.
// continues_word: the "##" entries of a WordPiece vocabulary; empty for other tokenizers.
BertSpecialTokens bert_special_tokens(const Tokenizer& tok);

struct BertDatasetOptions {
  int64_t seq_length = 128;      // max_seq_length: [CLS] A [SEP] B [SEP], then padding
  uint64_t seed = 1234;
  int64_t num_samples = 0;       // <= 0: one epoch's worth; else as many epochs as needed
  DocumentRange documents;       // DOCUMENTS (IndexedDataset::document_indices), not sequences
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  bool binary_head = true;       // sentence pairs with next-sentence labels (needs documents of >= 2 sentences); false: one segment [CLS] A [SEP] (RoBERTa-style, no NSP)
  bool whole_word_masking = true;
  int64_t long_sentence_len = 512;  // documents holding a longer sentence are skipped (Megatron's LONG_SENTENCE_LEN); <= 0: none
};

struct BertSample {              // every vector has seq_length entries
  std::vector<int64_t> input_ids, token_type_ids, attention_mask /*1 real token, 0 padding*/, labels /*original id at predicted positions, -100 elsewhere*/;
  int64_t next_sentence_label = 0;  // Hugging Face's convention: 0 = B continues A, 1 = random (Megatron's is_random)
};

class BertDataset {
 public:
  static constexpr int64_t kIgnoreLabel = -100;

  // Keeps a reference to `data`, which must outlive the dataset. Throws mf::Error naming the
  // dataset for a range out of bounds or with no usable document, a seq_length too small for
  // the head, probabilities outside [0, 1], or special tokens outside the vocabulary.
  BertDataset(const IndexedDataset& data, const BertSpecialTokens& special, const BertDatasetOptions& o);

  int64_t size() const { return static_cast<int64_t>(num_samples_); }
  // Fills `out` (its vectors resized to seq_length); thread-safe, a pure function of (seed, i).
  void sample_into(int64_t i, BertSample& out) const;
  BertSample sample(int64_t i) const;
  int64_t num_documents_used() const { return documents_used_; }
  int64_t num_epochs() const { return num_epochs_; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }

  using Entry = SentenceMapping::Entry;  // sentences [first, end) of one document; target: length of A + B
  // Sample i's entry of the (shuffled) mapping.
  const Entry& entry(int64_t i) const;

 private:
  const IndexedDataset& data_;
  BertSpecialTokens special_;
  BertDatasetOptions o_;
  int64_t max_num_tokens_ = 0, documents_used_ = 0, num_epochs_ = 0, samples_per_epoch_ = 0;
  size_t num_samples_ = 0;
  std::vector<Entry> mapping_;
};

}  // namespace mf
