// Sequence-classification samples for fine-tuning a BERT-style encoder (Hugging Face run_glue
// style). The examples are the lines of a jsonl file, {"text": "...", "label": 2}; every text
// is tokenized once and a sample is
//   input_ids      [CLS] t_1 .. t_k [SEP] pad ... pad   (k <= seq_length - 2: longer texts keep
//                                                       their first seq_length - 2 tokens)
//   token_type_ids 0 everywhere (one segment)
//   attention_mask 1 over [CLS] .. [SEP], 0 over the padding
//   label          the example's label.
// Evaluation (num_samples <= 0) walks the examples once in file order; training (num_samples > 0)
// draws that many samples over as many epochs as needed, epoch e in its own seeded shuffled order
// (random_permutation(num_examples, seed, 1 + e), as GptDataset orders documents), so sample i is
// example order[i / n][i % n]. scripts/make_fortune_classification.sh writes such files (a
// 4-class task from the fortune databases).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "meshflow/data/tokenizer.h"

namespace mf {

struct ClassificationOptions {
  int64_t seq_length = 128;  // [CLS] text [SEP] truncated to this, then padded; at least 2
  uint64_t seed = 1234;
  // <= 0: one pass over the examples in file order (evaluation); > 0: that many samples over as
  // many epochs as needed, each epoch in its own seeded shuffled order.
  int64_t num_samples = 0;
  std::string text_key = "text", label_key = "label";
};

struct ClassificationSample {
  std::vector<int64_t> input_ids, token_type_ids /* all 0 */, attention_mask /* 1 real, 0 pad */;
  int64_t label = 0;
};

class ClassificationDataset {
 public:
  static constexpr int64_t kMaxLabels = int64_t{1} << 20;  // labels are in [0, kMaxLabels)

  // Reads a jsonl file: one object per line with a string under text_key and an integer label in
  // [0, kMaxLabels) under label_key (blank lines skipped), and tokenizes every text once with
  // `tok` (not kept). cls/sep/pad are the special token ids, in [0, tok.vocab_size()). Throws
  // mf::Error naming file:line for a line that is not a JSON object, a missing key, a text that
  // is not a string, a label that is not an integer, negative or too large; and naming the file
  // when it cannot be read or holds no example.
  ClassificationDataset(const std::string& jsonl_path, const Tokenizer& tok, int32_t cls, int32_t sep, int32_t pad,
                        const ClassificationOptions& o);

  int64_t size() const { return num_samples_; }  // samples
  int64_t num_examples() const { return static_cast<int64_t>(labels_.size()); }
  int64_t num_labels() const { return static_cast<int64_t>(label_counts_.size()); }  // 1 + the largest label
  std::vector<int64_t> label_counts() const { return label_counts_; }  // examples per label
  int64_t truncated_examples() const { return truncated_; }  // examples longer than seq_length - 2 tokens
  int64_t num_epochs() const { return num_epochs_; }
  int64_t seq_length() const { return seq_length_; }
  // The example sample i shows (an index into the file's examples, in order).
  int64_t example_of(int64_t i) const;

  // Fills `out` (its vectors are resized to seq_length, their capacity reused). A pure function
  // of (file, options, i); safe to call from several threads at once. Throws for i outside
  // [0, size()).
  void sample_into(int64_t i, ClassificationSample& out) const;
  ClassificationSample sample(int64_t i) const;

 private:
  std::string path_;
  int64_t seq_length_;
  int32_t cls_, sep_, pad_;
  int64_t num_samples_ = 0, num_epochs_ = 1, truncated_ = 0;
  std::vector<int32_t> tokens_;    // every example's (truncated) tokens, concatenated
  std::vector<int64_t> offsets_;   // example k: tokens_[offsets_[k], offsets_[k + 1])
  std::vector<int64_t> labels_;
  std::vector<int64_t> label_counts_;
  std::vector<int64_t> order_;     // training: epoch e's permutation at [e * n, (e + 1) * n)
};

}  // namespace mf
