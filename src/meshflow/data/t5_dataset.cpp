// T5 span-corruption samples (see t5_dataset.h): the sentence mapping, then per sample the
// random segmentation of noise and non-noise tokens into spans, drawn from Philox.
#include "meshflow/data/t5_dataset.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "meshflow/core/error.h"

namespace mf {

std::vector<int32_t> t5_sentinel_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int k = 0;; ++k) {
    std::optional<int32_t> id = tok.token_to_id("<extra_id_" + std::to_string(k) + ">");
    if (!id) break;
    ids.push_back(*id);
  }
  return ids;
}

T5SpanCounts t5_span_counts(int64_t raw, double noise_density, double mean_noise_span_length) {
  MF_CHECK(raw >= 2, "T5 span corruption: a raw sample of ", raw, " tokens (at least 2: one noise, one kept)");
  T5SpanCounts c;
  // random_spans_noise_mask: numpy's round (half to even) is nearbyint's default mode.
  c.noise = static_cast<int64_t>(std::nearbyint(static_cast<double>(raw) * noise_density));
  c.noise = std::min(std::max<int64_t>(c.noise, 1), raw - 1);
  c.spans = static_cast<int64_t>(std::nearbyint(static_cast<double>(c.noise) / mean_noise_span_length));
  c.spans = std::max<int64_t>(1, std::min(c.spans, raw - c.noise));
  c.input_length = raw - c.noise + c.spans + 1;
  c.target_length = c.noise + c.spans + 1;
  return c;
}

int64_t t5_raw_length(int64_t encoder_length, int64_t decoder_length, double noise_density,
                      double mean_noise_span_length) {
  MF_CHECK(noise_density > 0 && noise_density < 1, "T5 span corruption: noise_density ", noise_density,
           " outside (0, 1)");
  MF_CHECK(mean_noise_span_length >= 1, "T5 span corruption: mean_noise_span_length ", mean_noise_span_length,
           " below 1");
  // Input and target lengths never shrink as the raw length grows, and the input grows without
  // bound (noise_density < 1): the first raw length that does not fit ends the search.
  int64_t n = 1;
  for (;;) {
    T5SpanCounts c = t5_span_counts(n + 1, noise_density, mean_noise_span_length);
    if (c.input_length > encoder_length || (decoder_length > 0 && c.target_length > decoder_length)) break;
    ++n;
  }
  return n >= 2 ? n : 0;
}

T5Dataset::T5Dataset(const IndexedDataset& data, const T5SpecialTokens& special, const T5DatasetOptions& o)
    : data_(data), special_(special), o_(o) {
  const std::string name = "T5Dataset " + data.prefix();
  MF_CHECK(o.noise_density > 0 && o.noise_density < 1, name, ": noise_density ", o.noise_density, " outside (0, 1)");
  MF_CHECK(o.mean_noise_span_length >= 1, name, ": mean_noise_span_length ", o.mean_noise_span_length,
           " below 1 (a span is a token or more)");
  constexpr int64_t kMaxLength = int64_t{1} << 24;
  if (o_.decoder_length <= 0 && o.encoder_length >= 3 && o.encoder_length <= kMaxLength) {
    // Hugging Face's compute_input_and_target_lengths: the target of the longest raw sample whose
    // input fills the encoder.
    const int64_t n = t5_raw_length(o.encoder_length, 0, o.noise_density, o.mean_noise_span_length);
    o_.decoder_length = t5_span_counts(n, o.noise_density, o.mean_noise_span_length).target_length;
  }
  MF_CHECK(o.encoder_length <= kMaxLength && o_.decoder_length <= kMaxLength, name, ": encoder_length ",
           o.encoder_length, " or decoder_length ", o_.decoder_length, " too large (at most 2^24)");
  MF_CHECK(o.encoder_length >= 3 && o_.decoder_length >= 3, name, ": encoder_length ", o.encoder_length,
           " and decoder_length ", o_.decoder_length,
           " must be 3 or more (a raw sample of 2 tokens gives the input: token, sentinel, eos; the target: "
           "sentinel, token, eos)");
  raw_length_ = t5_raw_length(o.encoder_length, o_.decoder_length, o.noise_density, o.mean_noise_span_length);
  MF_CHECK(raw_length_ >= 2, name, ": encoder_length ", o.encoder_length, " and decoder_length ", o_.decoder_length,
           " leave no room for a raw sample of 2 tokens");
  max_spans_ = t5_span_counts(raw_length_, o.noise_density, o.mean_noise_span_length).spans;
  MF_CHECK(static_cast<int64_t>(special.sentinels.size()) >= max_spans_, name, ": ", special.sentinels.size(),
           " sentinel ids for up to ", max_spans_, " noise spans (raw samples of ", raw_length_,
           " tokens for encoder_length ", o.encoder_length, " and decoder_length ", o_.decoder_length,
           ", noise_density ", o.noise_density, ", mean_noise_span_length ", o.mean_noise_span_length,
           "): give <extra_id_0> .. <extra_id_", max_spans_ - 1, "> at least");
  auto in_vocab = [&](const std::string& what, int32_t id) {
    MF_CHECK(id >= 0 && (special.vocab_size <= 0 || id < special.vocab_size), name, ": ", what, " id ", id,
             " outside the vocabulary [0, ", special.vocab_size, ")");
  };
  in_vocab("pad", special.pad);
  in_vocab("eos", special.eos);
  for (size_t k = 0; k < special.sentinels.size(); ++k)
    in_vocab("sentinel <extra_id_" + std::to_string(k) + ">", special.sentinels[k]);
  std::vector<int32_t> ids = special.sentinels;
  ids.push_back(special.pad);
  ids.push_back(special.eos);
  std::sort(ids.begin(), ids.end());
  auto twice = std::adjacent_find(ids.begin(), ids.end());
  MF_CHECK(twice == ids.end(), name, ": id ", twice == ids.end() ? 0 : *twice,
           " is two of pad, eos and the sentinels (each must be its own token)");

  SentenceMappingOptions mo;
  mo.documents = o.documents;
  mo.max_num_tokens = raw_length_;
  mo.short_seq_prob = o.short_seq_prob;
  mo.seed = o.seed;
  mo.num_samples = o.num_samples;
  mo.min_sentences = 1;
  mo.min_tokens = 2;
  mo.long_sentence_len = o.long_sentence_len;
  SentenceMapping m = build_sentence_mapping(data, mo, name, " (span corruption needs 2 tokens or more a sample)");
  mapping_ = std::move(m.entries);
  documents_used_ = m.documents_used;
  num_epochs_ = m.num_epochs;
  samples_per_epoch_ = m.samples_per_epoch;
}

const T5Dataset::Entry& T5Dataset::entry(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "T5Dataset ", data_.prefix(), ": sample ", i, " outside [0, ", size(), ")");
  return mapping_[static_cast<size_t>(i)];
}

T5Sample T5Dataset::sample(int64_t i) const {
  T5Sample s;
  sample_into(i, s);
  return s;
}

namespace {
// random_segmentation: `items` split into `segments` non-empty runs, uniformly over the ways to
// choose segments - 1 of the items - 1 boundaries (a shuffled boolean per boundary).
void random_segmentation(int64_t items, int64_t segments, PhiloxStream& rng, std::vector<int64_t>& lengths) {
  std::vector<char> starts(static_cast<size_t>(items - 1), 0);
  std::fill(starts.begin(), starts.begin() + (segments - 1), 1);
  for (size_t k = starts.size(); k > 1; --k) std::swap(starts[k - 1], starts[rng.below(k)]);
  lengths.assign(static_cast<size_t>(segments), 0);
  size_t seg = 0;
  ++lengths[0];
  for (char s : starts) {
    seg += static_cast<size_t>(s);
    ++lengths[seg];
  }
}
}  // namespace

void T5Dataset::sample_into(int64_t i, T5Sample& out) const {
  const Entry& e = entry(i);
  PhiloxStream rng(o_.seed, static_cast<uint64_t>(i));

  // The raw sample: the sentences' first `target` tokens (Megatron's T5 truncation keeps the front).
  std::vector<int32_t> raw;
  for (int64_t s = e.first; s < e.end && static_cast<int64_t>(raw.size()) < e.target; ++s) data_.read(s, 0, -1, raw);
  if (static_cast<int64_t>(raw.size()) > e.target) raw.resize(static_cast<size_t>(e.target));
  const int64_t n = static_cast<int64_t>(raw.size());
  const T5SpanCounts c = t5_span_counts(n, o_.noise_density, o_.mean_noise_span_length);

  // Noise spans, then non-noise spans (random_spans_noise_mask's order); they alternate
  // kept, noise, kept, ..., noise.
  std::vector<int64_t> noise_len, keep_len;
  random_segmentation(c.noise, c.spans, rng, noise_len);
  random_segmentation(n - c.noise, c.spans, rng, keep_len);

  const size_t Te = static_cast<size_t>(o_.encoder_length), Td = static_cast<size_t>(o_.decoder_length);
  MF_CHECK(static_cast<size_t>(c.input_length) <= Te && static_cast<size_t>(c.target_length) <= Td, "T5Dataset ",
           data_.prefix(), ": sample ", i, " of ", n, " tokens does not fit");  // the mapping's targets keep n <= raw_length
  out.input_ids.assign(Te, special_.pad);
  out.attention_mask.assign(Te, 0);
  out.labels.assign(Td, kIgnoreLabel);
  out.decoder_input_ids.assign(Td, special_.pad);
  out.decoder_attention_mask.assign(Td, 0);
  size_t r = 0, in = 0, tg = 0;
  for (size_t k = 0; k < static_cast<size_t>(c.spans); ++k) {
    for (int64_t j = 0; j < keep_len[k]; ++j) out.input_ids[in++] = raw[r++];
    const int32_t sentinel = special_.sentinels[k];
    out.input_ids[in++] = sentinel;
    out.labels[tg++] = sentinel;
    for (int64_t j = 0; j < noise_len[k]; ++j) out.labels[tg++] = raw[r++];
  }
  out.input_ids[in++] = special_.eos;
  out.labels[tg++] = special_.eos;
  std::fill(out.attention_mask.begin(), out.attention_mask.begin() + static_cast<std::ptrdiff_t>(in), 1);
  std::fill(out.decoder_attention_mask.begin(), out.decoder_attention_mask.begin() + static_cast<std::ptrdiff_t>(tg), 1);
  // shift_tokens_right: the decoder start token (pad), then the labels but the last, padding as pad.
  for (size_t j = 1; j < Td; ++j)
    out.decoder_input_ids[j] = out.labels[j - 1] == kIgnoreLabel ? special_.pad : out.labels[j - 1];
}

}  // namespace mf
