#include "meshflow/train/t5_batches.h"

#include <algorithm>

namespace mf::train {

namespace {
// Copies `v` (len entries) into row b of the (B, len) i64 tensor t.
void put_row(Tensor& t, int64_t b, const std::vector<int64_t>& v, int64_t len, const char* what) {
  MF_CHECK(static_cast<int64_t>(v.size()) == len, "T5 batches: a sample's ", what, " holds ", v.size(), " tokens, not ", len);
  std::copy(v.begin(), v.end(), t.data<int64_t>() + b * len);
}
}  // namespace

models::Batch T5BatchSource::next(int64_t micro_batch) {
  const std::vector<int64_t> idx = sampler_.next_batch(micro_batch);
  const int64_t te = data_.encoder_length(), td = data_.decoder_length();
  models::Batch out;
  out.input_ids = empty({micro_batch, te}, DType::kI64);
  out.attention_mask = empty({micro_batch, te}, DType::kI64);
  out.decoder_input_ids = empty({micro_batch, td}, DType::kI64);
  out.decoder_attention_mask = empty({micro_batch, td}, DType::kI64);
  out.labels = empty({micro_batch, td}, DType::kI64);
  T5Sample s;
  for (int64_t b = 0; b < micro_batch; ++b) {
    data_.sample_into(idx[static_cast<size_t>(b)], s);
    put_row(out.input_ids, b, s.input_ids, te, "input_ids");
    put_row(out.attention_mask, b, s.attention_mask, te, "attention_mask");
    put_row(out.decoder_input_ids, b, s.decoder_input_ids, td, "decoder_input_ids");
    put_row(out.decoder_attention_mask, b, s.decoder_attention_mask, td, "decoder_attention_mask");
    put_row(out.labels, b, s.labels, td, "labels");
  }
  return out;
}

}  // namespace mf::train
