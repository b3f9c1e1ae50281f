#include "meshflow/train/bert_batches.h"

#include <algorithm>

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

}  // namespace mf::train
