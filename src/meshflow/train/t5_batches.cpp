#include "meshflow/train/t5_batches.h"

#include <algorithm>

#include <optional>
#include <tuple>

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


RunSources span_corruption_data(const RecipeInputs& in) {
  RunSources r;
  const Config& c = in.config;
  const Tokenizer& tok = in.tokenizer;
  T5SpecialTokens special;
  special.pad = static_cast<int32_t>(c.get_int("model.pad_token_id"));
  special.eos = tok.eod_id();
  special.sentinels = t5_sentinel_ids(tok);
  special.vocab_size = tok.vocab_size();
  MF_CHECK(!special.sentinels.empty(), "span corruption needs the sentinel tokens <extra_id_0>, <extra_id_1>, ... "
           "and the ", tok.name(), " tokenizer has none: set tokenization.extra_ids=100 (T5's) on a sentencepiece "
           "tokenizer");
  if (std::optional<int32_t> p = tok.token_to_id("<pad>"))
    MF_CHECK(*p == special.pad, "model.pad_token_id ", special.pad, " is not the tokenizer's <pad> (id ", *p,
             "): set model.pad_token_id=", *p);
  const int64_t dec = c.get_int("model.decoder_seq_length");
  MF_CHECK(dec > 0, "model.decoder_seq_length ", dec, " must be a length (114 for a 512-token encoder input)");
  auto d = std::make_shared<SplitData>(open_split_data(c, /*by_document=*/true));
  auto open = [&](DocumentRange range, uint64_t seed, int64_t samples) {
    T5DatasetOptions to;
    to.encoder_length = in.seq_length;
    to.decoder_length = dec;
    to.seed = seed;
    to.num_samples = samples;
    to.documents = range;
    to.noise_density = c.get_float("data.noise_density");
    to.mean_noise_span_length = c.get_float("data.mean_noise_span_length");
    to.short_seq_prob = c.get_float("data.short_seq_prob");
    return std::make_shared<T5Dataset>(*d->indexed, special, to);
  };
  const auto datasets = open_train_valid(in, *d, open);
  const std::shared_ptr<T5Dataset> train = datasets.first, valid = datasets.second;
  const int64_t dp_rank = in.dp_rank, dp = in.dp;
  if (train) r.train = std::make_unique<T5BatchSource>(*train, dp_rank, dp);
  if (valid) r.valid = [valid, dp_rank, dp] { return std::make_unique<T5BatchSource>(*valid, dp_rank, dp); };
  const T5Dataset& any = train ? *train : *valid;
  r.note = detail::cat("span corruption: raw samples of up to ", any.raw_length(), " tokens, encoder ",
                       any.encoder_length(), " and decoder ", any.decoder_length(), " tokens, up to ",
                       any.max_spans(), " noise spans (", special.sentinels.size(), " sentinels)");
  r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
  return r;
}

}  // namespace mf::train
