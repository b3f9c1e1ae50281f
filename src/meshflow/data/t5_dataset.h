// T5 span-corruption samples for an encoder-decoder, over an indexed dataset of one sequence per
// sentence (`meshflow preprocess --split-sentences`): Megatron's sample mapping
// (sentence_mapping.h, as its T5 dataset uses it: whole sentences of one document up to a target
// length, shorter with probability short_seq_prob), then the corruption of the T5 paper /
// Hugging Face's run_t5_mlm (random_spans_noise_mask, compute_input_and_target_lengths).
//   Raw length. A raw sample of n tokens has num_noise = round(n * noise_density) clamped to
//   [1, n - 1] and num_spans = max(1, round(num_noise / mean_noise_span_length)) (at most n -
//   num_noise, so that every non-noise span is a token or more; it only binds for noise_density
//   above ~0.75); its encoder input is n - num_noise + num_spans + 1 tokens and its target
//   num_noise + num_spans + 1 (round: half to even, numpy's). raw_length() is the largest n whose
//   input and target fit encoder_length and decoder_length (both grow with n, so every shorter
//   sample fits too): the mapping's longest target (encoder 512 and decoder 114 give 568, as
//   Hugging Face's compute_input_and_target_lengths(512, 0.15, 3) does).
//   Sample i takes the sentences of its mapping entry, keeps their first min(tokens, target)
//   tokens, and draws from Philox under (seed, stream i) only — a pure function of (data,
//   options, i), the same under every parallel layout: the noise and the non-noise tokens are each
//   split into num_spans non-empty spans uniformly at random (random segmentation), and the spans
//   alternate non-noise, noise, non-noise, ..., noise. The encoder input replaces noise span k by
//   the sentinel k (<extra_id_k>) and ends with eos; the target is sentinel k followed by noise
//   span k, for every k, then eos. Replacing each sentinel of the input by the tokens after it in
//   the target gives the raw sample back.
//   Output: input_ids (encoder_length) padded with pad and attention_mask (1 on the input);
//   labels (decoder_length) the target, -100 after it; decoder_input_ids the decoder start token
//   (pad, T5's convention) then labels[:-1] with padding as pad; decoder_attention_mask 1 on the
//   target's positions.
// Unlike Megatron's T5 dataset: Hugging Face's noise (a fixed noise share in spans of random
// lengths, one sentinel per span) instead of Megatron's masked-LM n-gram spans, and the raw
// length derived from both lengths instead of max_seq_length - 2; Philox numbers.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/sentence_mapping.h"
#include "meshflow/data/split.h"
#include "meshflow/data/tokenizer.h"

namespace mf {

struct T5SpecialTokens {
  int32_t pad = 0;                 // input padding and the decoder start token (T5: <pad> = 0)
  int32_t eos = 1;                 // ends the input and the target (T5: </s> = 1)
  std::vector<int32_t> sentinels;  // sentinels[k] = <extra_id_k> (Hugging Face: vocab_size - 1 - k)
  int64_t vocab_size = 0;          // > 0: every id above must be below it; 0: unchecked
};

// The ids of <extra_id_0>, <extra_id_1>, ... that `tok` has (token_to_id), up to the first
// missing one; empty when it has none.
std::vector<int32_t> t5_sentinel_ids(const Tokenizer& tok);

struct T5DatasetOptions {
  int64_t encoder_length = 512;  // input_ids, attention_mask
  int64_t decoder_length = 0;    // labels, decoder_input_ids, decoder_attention_mask; <= 0: the target length of
                                 //   a raw sample whose input fills encoder_length (Hugging Face's: 114 for 512)
  uint64_t seed = 1234;
  int64_t num_samples = 0;       // <= 0: one epoch's worth; else as many epochs as needed
  DocumentRange documents;       // DOCUMENTS (IndexedDataset::document_indices), not sequences
  double noise_density = 0.15;
  double mean_noise_span_length = 3.0;
  double short_seq_prob = 0.1;
  int64_t long_sentence_len = 512;  // documents holding a longer sentence are skipped; <= 0: none
};

struct T5Sample {
  std::vector<int64_t> input_ids, attention_mask;  // encoder_length entries
  std::vector<int64_t> labels /*-100 after the target*/, decoder_input_ids, decoder_attention_mask;  // decoder_length
};

// The corruption of a raw sample of `raw` tokens (>= 2): counts and lengths.
struct T5SpanCounts {
  int64_t noise = 0, spans = 0;
  int64_t input_length = 0, target_length = 0;  // with eos
};
T5SpanCounts t5_span_counts(int64_t raw, double noise_density, double mean_noise_span_length);

// The largest raw length whose input fits encoder_length (and, when decoder_length > 0, whose
// target fits decoder_length); 0 when not even 2 tokens fit. decoder_length 0 and its target
// length are Hugging Face's compute_input_and_target_lengths.
int64_t t5_raw_length(int64_t encoder_length, int64_t decoder_length, double noise_density,
                      double mean_noise_span_length);

class T5Dataset {
 public:
  static constexpr int64_t kIgnoreLabel = -100;

  // Keeps a reference to `data`, which must outlive the dataset. Throws mf::Error naming the
  // dataset for a range out of bounds or with no usable document (a sentence, 2 tokens or more),
  // noise_density outside (0, 1), mean_noise_span_length < 1, lengths too small for a raw
  // sample of 2 tokens, fewer sentinels than the longest sample's spans, or special ids outside
  // the vocabulary, equal to each other or repeated.
  T5Dataset(const IndexedDataset& data, const T5SpecialTokens& special, const T5DatasetOptions& o);

  int64_t size() const { return static_cast<int64_t>(mapping_.size()); }
  // Fills `out` (its vectors resized); thread-safe, a pure function of (seed, i).
  void sample_into(int64_t i, T5Sample& out) const;
  T5Sample sample(int64_t i) const;

  int64_t raw_length() const { return raw_length_; }  // the longest raw sample (the mapping's max_num_tokens)
  int64_t max_spans() const { return max_spans_; }    // noise spans of a raw sample of raw_length() tokens
  int64_t encoder_length() const { return o_.encoder_length; }
  int64_t decoder_length() const { return o_.decoder_length; }  // resolved (never 0)
  int64_t num_documents_used() const { return documents_used_; }
  int64_t num_epochs() const { return num_epochs_; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }

  using Entry = SentenceMapping::Entry;  // sentences [first, end) of one document; target: raw tokens kept at most
  // Sample i's entry of the (shuffled) mapping.
  const Entry& entry(int64_t i) const;

 private:
  const IndexedDataset& data_;
  T5SpecialTokens special_;
  T5DatasetOptions o_;
  int64_t raw_length_ = 0, max_spans_ = 0, documents_used_ = 0, num_epochs_ = 0, samples_per_epoch_ = 0;
  std::vector<Entry> mapping_;
};

}  // namespace mf
