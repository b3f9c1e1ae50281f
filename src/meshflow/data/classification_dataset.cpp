// ClassificationDataset: jsonl examples, tokenized once; per-epoch seeded shuffles (see
// classification_dataset.h).
#include "meshflow/data/classification_dataset.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"
#include "meshflow/data/jsonl.h"
#include "meshflow/data/shuffle.h"

namespace mf {

ClassificationDataset::ClassificationDataset(const std::string& jsonl_path, const Tokenizer& tok, int32_t cls,
                                             int32_t sep, int32_t pad, const ClassificationOptions& o)
    : path_(jsonl_path), seq_length_(o.seq_length), cls_(cls), sep_(sep), pad_(pad) {
  const std::string where = "ClassificationDataset " + jsonl_path;
  MF_CHECK(o.seq_length >= 2, where, ": seq_length must be at least 2 ([CLS] and [SEP]), got ", o.seq_length);
  for (auto [name, id] : {std::pair<const char*, int32_t>{"cls", cls}, {"sep", sep}, {"pad", pad}})
    MF_CHECK(id >= 0 && id < tok.vocab_size(), where, ": ", name, " id ", id, " outside the tokenizer's vocabulary [0, ",
             tok.vocab_size(), ")");

  const auto keep = static_cast<size_t>(seq_length_ - 2);
  offsets_.push_back(0);
  for_each_jsonl_object(jsonl_path, where, [&](int64_t lineno, const nlohmann::json& j) {
    const std::string& text = jsonl_string(j, o.text_key, where, lineno);
    auto label = j.find(o.label_key);
    MF_CHECK(label != j.end(), where, ":", lineno, ": no key '", o.label_key, "'");
    MF_CHECK(label->is_number_integer(), where, ":", lineno, ": label '", o.label_key, "' must be an integer, got ",
             label->dump());
    MF_CHECK(label->is_number_unsigned() || label->get<int64_t>() >= 0, where, ":", lineno,
             ": label must be >= 0, got ", label->dump());
    MF_CHECK(label->get<uint64_t>() < static_cast<uint64_t>(kMaxLabels), where, ":", lineno, ": label ",
             label->dump(), " is too large (labels are below ", kMaxLabels, ")");
    const auto y = static_cast<int64_t>(label->get<uint64_t>());

    std::vector<int32_t> ids = tok.encode(text);
    if (ids.size() > keep) {
      ++truncated_;
      ids.resize(keep);
    }
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    offsets_.push_back(static_cast<int64_t>(tokens_.size()));
    labels_.push_back(y);
    if (y >= static_cast<int64_t>(label_counts_.size())) label_counts_.resize(static_cast<size_t>(y + 1), 0);
    ++label_counts_[static_cast<size_t>(y)];
  });
  MF_CHECK(!labels_.empty(), where, ": the file holds no example");

  const int64_t n = num_examples();
  if (o.num_samples <= 0) {
    num_samples_ = n;
    return;
  }
  num_samples_ = o.num_samples;
  num_epochs_ = (num_samples_ + n - 1) / n;
  order_.reserve(static_cast<size_t>(num_epochs_ * n));
  for (int64_t e = 0; e < num_epochs_; ++e) {
    std::vector<int64_t> p = random_permutation(n, o.seed, 1 + static_cast<uint64_t>(e));
    order_.insert(order_.end(), p.begin(), p.end());
  }
}

int64_t ClassificationDataset::example_of(int64_t i) const {
  MF_CHECK(i >= 0 && i < num_samples_, "ClassificationDataset ", path_, ": sample ", i, " outside [0, ", num_samples_,
           ")");
  return order_.empty() ? i : order_[static_cast<size_t>(i)];
}

void ClassificationDataset::sample_into(int64_t i, ClassificationSample& out) const {
  const auto k = static_cast<size_t>(example_of(i));
  const auto len = static_cast<size_t>(seq_length_);
  const auto begin = tokens_.begin() + offsets_[k], end = tokens_.begin() + offsets_[k + 1];
  const size_t real = static_cast<size_t>(end - begin) + 2;
  out.input_ids.assign(len, pad_);
  out.input_ids[0] = cls_;
  std::copy(begin, end, out.input_ids.begin() + 1);
  out.input_ids[real - 1] = sep_;
  out.token_type_ids.assign(len, 0);
  out.attention_mask.assign(len, 0);
  std::fill(out.attention_mask.begin(), out.attention_mask.begin() + static_cast<std::ptrdiff_t>(real), 1);
  out.label = labels_[k];
}

ClassificationSample ClassificationDataset::sample(int64_t i) const {
  ClassificationSample s;
  sample_into(i, s);
  return s;
}

}  // namespace mf
