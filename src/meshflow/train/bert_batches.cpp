#include "meshflow/train/bert_batches.h"

#include <algorithm>

#include <tuple>
#include <utility>

namespace mf::train {

namespace {
// Copies `v` (seq entries) into row b of the (B, seq) i64 tensor t.
void put_row(Tensor& t, int64_t b, const std::vector<int64_t>& v, int64_t seq, const char* what) {
  MF_CHECK(static_cast<int64_t>(v.size()) == seq, "batches: a sample's ", what, " holds ", v.size(), " tokens, not ", seq);
  std::copy(v.begin(), v.end(), t.data<int64_t>() + b * seq);
}
}  // namespace

models::Batch BertBatchSource::next(int64_t micro_batch) {
  const std::vector<int64_t> idx = sampler_.next_batch(micro_batch);
  models::Batch out;
  out.input_ids = empty({micro_batch, seq_}, DType::kI64);
  out.token_type_ids = empty({micro_batch, seq_}, DType::kI64);
  out.attention_mask = empty({micro_batch, seq_}, DType::kI64);
  out.labels = empty({micro_batch, seq_}, DType::kI64);
  if (nsp_) out.next_sentence_label = empty({micro_batch}, DType::kI64);
  BertSample s;
  for (int64_t b = 0; b < micro_batch; ++b) {
    data_.sample_into(idx[static_cast<size_t>(b)], s);
    put_row(out.input_ids, b, s.input_ids, seq_, "input_ids");
    put_row(out.token_type_ids, b, s.token_type_ids, seq_, "token_type_ids");
    put_row(out.attention_mask, b, s.attention_mask, seq_, "attention_mask");
    put_row(out.labels, b, s.labels, seq_, "labels");
    if (nsp_) out.next_sentence_label.data<int64_t>()[b] = s.next_sentence_label;
  }
  return out;
}

models::Batch ClassificationBatchSource::next(int64_t micro_batch) {
  const std::vector<int64_t> idx = sampler_.next_batch(micro_batch);
  models::Batch out;
  out.input_ids = empty({micro_batch, seq_}, DType::kI64);
  out.token_type_ids = empty({micro_batch, seq_}, DType::kI64);
  out.attention_mask = empty({micro_batch, seq_}, DType::kI64);
  out.labels = empty({micro_batch}, DType::kI64);
  ClassificationSample s;
  for (int64_t b = 0; b < micro_batch; ++b) {
    data_.sample_into(idx[static_cast<size_t>(b)], s);
    put_row(out.input_ids, b, s.input_ids, seq_, "input_ids");
    put_row(out.token_type_ids, b, s.token_type_ids, seq_, "token_type_ids");
    put_row(out.attention_mask, b, s.attention_mask, seq_, "attention_mask");
    out.labels.data<int64_t>()[b] = s.label;
  }
  return out;
}


namespace {
// The BERT family pads with the tokenizer's padding token; RoBERTa's positions count from it.
BertSpecialTokens checked_special_tokens(const RecipeInputs& in) {
  const BertSpecialTokens s = bert_special_tokens(in.tokenizer);
  const int64_t pad = in.config.get_int("model.pad_token_id");
  MF_CHECK(s.pad == pad, "model.pad_token_id ", pad, " is not the tokenizer's padding token ",
           in.tokenizer.id_to_token(s.pad), " (id ", s.pad, "): set model.pad_token_id=", s.pad);
  return s;
}
}  // namespace

RunSources masked_lm_data(const RecipeInputs& in) {
  RunSources r;
  const Config& c = in.config;
  const int64_t seq = in.seq_length;
  auto d = std::make_shared<SplitData>(open_split_data(c, /*by_document=*/true));
  const BertSpecialTokens special = checked_special_tokens(in);
  const bool nsp = c.get_string("model.name") == "bert" && c.get_bool("model.add_binary_head");
  auto open = [&](DocumentRange range, uint64_t seed, int64_t samples) {
    BertDatasetOptions bo;
    bo.seq_length = seq;
    bo.seed = seed;
    bo.num_samples = samples;
    bo.documents = range;
    bo.masked_lm_prob = c.get_float("data.masked_lm_prob");
    bo.short_seq_prob = c.get_float("data.short_seq_prob");
    bo.whole_word_masking = c.get_bool("data.whole_word_masking");
    bo.binary_head = nsp;
    return std::make_shared<BertDataset>(*d->indexed, special, bo);
  };
  const auto datasets = open_train_valid(in, *d, open);
  const std::shared_ptr<BertDataset> train = datasets.first, valid = datasets.second;
  const int64_t dp_rank = in.dp_rank, dp = in.dp;
  if (train) r.train = std::make_unique<BertBatchSource>(*train, seq, nsp, dp_rank, dp);
  if (valid)
    r.valid = [valid, seq, nsp, dp_rank, dp] { return std::make_unique<BertBatchSource>(*valid, seq, nsp, dp_rank, dp); };
  r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
  return r;
}

RunSources sequence_classification_data(const RecipeInputs& in) {
  RunSources r;
  const Config& c = in.config;
  const int64_t seq = in.seq_length;
  const BertSpecialTokens special = checked_special_tokens(in);
  auto open = [&](const char* key, uint64_t seed, int64_t samples) {
    const std::string path = c.get_string(key);
    MF_CHECK(!path.empty(), key, " is empty: a sequence classifier trains on jsonl lines of {\"text\": ..., "
             "\"label\": <integer>} (scripts/make_fortune_classification.sh writes an example)");
    ClassificationOptions co;
    co.seq_length = seq;
    co.seed = seed;
    co.num_samples = samples;
    return std::make_shared<ClassificationDataset>(path, in.tokenizer, special.cls, special.sep, special.pad, co);
  };
  std::shared_ptr<ClassificationDataset> train, valid;
  if (in.train_samples > 0) train = open("data.train_file", in.options.seed, in.train_samples);
  if (in.valid_samples > 0) valid = open("data.validation_file", in.options.seed + 1, 0);
  const int64_t labels = c.get_int("model.num_labels");
  for (const auto& d : {train, valid})
    MF_CHECK(!d || d->num_labels() <= labels, "classification data: labels up to ", d ? d->num_labels() - 1 : 0,
             " for model.num_labels ", labels);
  const int64_t dp_rank = in.dp_rank, dp = in.dp;
  if (train) r.train = std::make_unique<ClassificationBatchSource>(*train, seq, dp_rank, dp);
  if (valid) {
    r.valid = [valid, seq, dp_rank, dp] { return std::make_unique<ClassificationBatchSource>(*valid, seq, dp_rank, dp); };
    const std::vector<int64_t> counts = valid->label_counts();
    const int64_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
    const bool wraps = in.valid_samples > valid->num_examples();
    r.note = detail::cat("classification: ", train ? train->num_examples() : 0, " training examples, ",
                         valid->num_examples(), " held out (", in.valid_samples, " scored per evaluation, in order",
                         wraps ? ", the first ones again after the last" : "", "), majority class ",
                         static_cast<double>(most) / static_cast<double>(std::max<int64_t>(1, valid->num_examples())),
                         " of them");
  }
  r.keep = std::make_shared<std::pair<decltype(train), decltype(valid)>>(train, valid);
  return r;
}

}  // namespace mf::train
