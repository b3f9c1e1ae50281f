// T5Dataset (span corruption over Megatron's sentence mapping) and T5BatchSource: the raw length
// against Hugging Face's compute_input_and_target_lengths, the counts against hand-worked values,
// every sample un-corrupted back to its raw tokens (read here from the test's own token scheme),
// the noise share, span lengths and their random segmentation, padding, masks and the decoder
// shift, determinism, data-parallel slices, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "data_testing.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/t5_dataset.h"
#include "meshflow/train/t5_batches.h"
#include "testing.h"

namespace {

using mf::T5Dataset;
using mf::T5DatasetOptions;
using mf::T5Sample;

// Token k of sentence s of document d: every token names its document, sentence and place.
int32_t tok_of(int64_t d, int64_t s, int64_t k) { return static_cast<int32_t>(10000 * (d + 1) + 100 * s + k); }

constexpr int32_t kPad = 0, kEos = 1;
constexpr int64_t kVocab = 1 << 20;

// Hugging Face's convention: <extra_id_k> is the vocabulary's id V - 1 - k.
mf::T5SpecialTokens specials(int n = 100) {
  mf::T5SpecialTokens s;
  s.pad = kPad, s.eos = kEos, s.vocab_size = kVocab;
  for (int k = 0; k < n; ++k) s.sentinels.push_back(static_cast<int32_t>(kVocab - 1 - k));
  return s;
}
bool is_sentinel(int64_t t) { return t >= kVocab - 100 && t < kVocab; }
int64_t sentinel_index(int64_t t) { return kVocab - 1 - t; }

// docs[d] = the lengths of document d's sentences.
std::string build(const mft::TempDir& dir, const std::vector<std::vector<int>>& docs) {
  std::string prefix = dir.file("t5");
  mf::IndexedDatasetBuilder b(prefix, mf::IndexDType::kI32);
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<std::vector<int32_t>> sentences;
    for (size_t s = 0; s < docs[d].size(); ++s) {
      sentences.emplace_back();
      for (int k = 0; k < docs[d][s]; ++k) sentences.back().push_back(tok_of(static_cast<int64_t>(d), static_cast<int64_t>(s), k));
    }
    b.add_document(sentences);
  }
  b.finalize();
  return prefix;
}

// 60 documents of 1..12 sentences of 3..30 tokens; document 7 is one sentence of one token
// (too short for a sample), document 9 one sentence of 5 tokens.
std::vector<std::vector<int>> corpus() {
  std::vector<std::vector<int>> docs;
  for (int d = 0; d < 60; ++d) {
    docs.emplace_back();
    if (d == 7) docs.back() = {1};
    else if (d == 9) docs.back() = {5};
    else
      for (int s = 0, n = 3 + (d * 5) % 10; s < n; ++s) docs.back().push_back(3 + (d * 13 + s * 11) % 28);
  }
  return docs;
}

T5DatasetOptions options(int64_t encoder = 128, int64_t decoder = 0) {
  T5DatasetOptions o;
  o.encoder_length = encoder;
  o.decoder_length = decoder;
  o.documents = {0, 60};
  return o;
}

// The raw tokens of sample i, from the test's token scheme: the entry's sentences, their first
// `target` tokens.
std::vector<int64_t> raw_tokens(const T5Dataset& ds, const mf::IndexedDataset& data,
                                const std::vector<std::vector<int>>& docs, int64_t i) {
  const auto& e = ds.entry(i);
  const auto& di = data.document_indices();
  const int64_t d = std::upper_bound(di.begin(), di.end(), e.first) - di.begin() - 1;
  EXPECT_LE(e.end, di[d + 1]) << "sample " << i << " crosses a document end";
  std::vector<int64_t> raw;
  for (int64_t s = e.first; s < e.end; ++s)
    for (int k = 0; k < docs[d][s - di[d]]; ++k) raw.push_back(tok_of(d, s - di[d], k));
  if (static_cast<int64_t>(raw.size()) > e.target) raw.resize(static_cast<size_t>(e.target));
  return raw;
}

// A sample taken apart: checks its layout exactly (input: kept span, sentinel, ..., eos, pad...;
// labels: sentinel, noise span, ..., eos, -100...; masks; the decoder's shift) and returns the
// spans and the un-corrupted tokens.
struct Parsed {
  std::vector<int64_t> keep_lengths, noise_lengths;
  std::vector<int64_t> uncorrupted;  // each sentinel of the input replaced by its span of the target
  size_t input_length = 0, target_length = 0;
};

Parsed parse(const T5Sample& s, size_t te, size_t td, const std::string& where) {
  Parsed p;
  EXPECT_EQ(s.input_ids.size(), te) << where;
  EXPECT_EQ(s.attention_mask.size(), te) << where;
  EXPECT_EQ(s.labels.size(), td) << where;
  EXPECT_EQ(s.decoder_input_ids.size(), td) << where;
  EXPECT_EQ(s.decoder_attention_mask.size(), td) << where;
  // The target: sentinel 0, its span, sentinel 1, ..., eos.
  std::vector<std::vector<int64_t>> spans;
  size_t j = 0;
  for (; j < td && s.labels[j] != kEos; ++j) {
    int64_t t = s.labels[j];
    if (is_sentinel(t)) {
      EXPECT_EQ(sentinel_index(t), static_cast<int64_t>(spans.size())) << where << ": sentinels out of order";
      spans.emplace_back();
    } else {
      EXPECT_FALSE(spans.empty()) << where << ": the target does not start with a sentinel";
      EXPECT_NE(t, kPad) << where;
      EXPECT_NE(t, T5Dataset::kIgnoreLabel) << where;
      if (!spans.empty()) spans.back().push_back(t);
    }
  }
  EXPECT_LT(j, td) << where << ": no eos in the target";
  p.target_length = j + 1;
  for (const auto& sp : spans) {
    EXPECT_FALSE(sp.empty()) << where << ": an empty noise span";
    p.noise_lengths.push_back(static_cast<int64_t>(sp.size()));
  }
  // The input: kept span, sentinel, ..., kept span, sentinel, eos.
  size_t k = 0, next = 0;
  int64_t run = 0;
  for (; k < te && s.input_ids[k] != kEos; ++k) {
    int64_t t = s.input_ids[k];
    EXPECT_NE(t, kPad) << where;
    if (is_sentinel(t)) {
      EXPECT_EQ(sentinel_index(t), static_cast<int64_t>(next)) << where << ": input sentinels out of order";
      EXPECT_GT(run, 0) << where << ": an empty kept span";
      p.keep_lengths.push_back(run);
      run = 0;
      if (next < spans.size()) p.uncorrupted.insert(p.uncorrupted.end(), spans[next].begin(), spans[next].end());
      ++next;
    } else {
      p.uncorrupted.push_back(t);
      ++run;
    }
  }
  EXPECT_LT(k, te) << where << ": no eos in the input";
  EXPECT_EQ(run, 0) << where << ": the input does not end with a noise span";
  EXPECT_EQ(next, spans.size()) << where << ": input and target sentinels differ";
  p.input_length = k + 1;
  // Padding and masks.
  for (size_t q = 0; q < te; ++q) {
    EXPECT_EQ(s.attention_mask[q], q < p.input_length ? 1 : 0) << where << " input " << q;
    if (q >= p.input_length) {
      EXPECT_EQ(s.input_ids[q], kPad) << where << " input " << q;
    }
  }
  for (size_t q = 0; q < td; ++q) {
    const bool real = q < p.target_length;
    EXPECT_EQ(s.decoder_attention_mask[q], real ? 1 : 0) << where << " decoder " << q;
    if (!real) {
      EXPECT_EQ(s.labels[q], T5Dataset::kIgnoreLabel) << where << " label " << q;
    }
    // Hugging Face's shift_tokens_right with decoder_start_token_id = pad_token_id.
    const int64_t want = q == 0 ? kPad : (s.labels[q - 1] == T5Dataset::kIgnoreLabel ? kPad : s.labels[q - 1]);
    EXPECT_EQ(s.decoder_input_ids[q], want) << where << " decoder input " << q;
  }
  return p;
}

TEST(T5SpanCounts, HandWorkedValuesAndHuggingFaceLengths) {
  struct Case {
    int64_t raw, noise, spans;
  };
  // noise = round(0.15 n) half to even, in [1, n - 1]; spans = max(1, round(noise / 3)).
  for (Case c : {Case{2, 1, 1}, Case{3, 1, 1}, Case{10, 2, 1} /*1.5 -> 2*/, Case{20, 3, 1}, Case{30, 4, 1} /*4.5 -> 4*/,
                 Case{50, 8, 3} /*7.5 -> 8*/, Case{100, 15, 5}, Case{141, 21, 7}, Case{568, 85, 28}}) {
    mf::T5SpanCounts k = mf::t5_span_counts(c.raw, 0.15, 3.0);
    EXPECT_EQ(k.noise, c.noise) << c.raw;
    EXPECT_EQ(k.spans, c.spans) << c.raw;
    EXPECT_EQ(k.input_length, c.raw - c.noise + c.spans + 1) << c.raw;
    EXPECT_EQ(k.target_length, c.noise + c.spans + 1) << c.raw;
  }
  // A high density: spans are at most the kept tokens (every kept span holds one or more).
  mf::T5SpanCounts dense = mf::t5_span_counts(10, 0.9, 1.0);
  EXPECT_EQ(dense.noise, 9);
  EXPECT_EQ(dense.spans, 1);
  // Hugging Face's compute_input_and_target_lengths(512, 0.15, 3) = (568, 114); (128, ...) = (141, 29).
  EXPECT_EQ(mf::t5_raw_length(512, 0, 0.15, 3.0), 568);
  EXPECT_EQ(mf::t5_raw_length(512, 114, 0.15, 3.0), 568);
  EXPECT_EQ(mf::t5_raw_length(128, 0, 0.15, 3.0), 141);
  // The decoder binds: n = 96 gives 14 noise in 5 spans (target 20); 97 gives 15 (21).
  EXPECT_EQ(mf::t5_raw_length(128, 20, 0.15, 3.0), 96);
  EXPECT_EQ(mf::t5_raw_length(2, 0, 0.15, 3.0), 0);
  MFT_EXPECT_ERROR(mf::t5_span_counts(1, 0.15, 3.0), "1 tokens");
}

TEST(T5Dataset, DeterministicAndIndependentOfOrder) {
  mft::TempDir dir;
  mf::IndexedDataset data(build(dir, corpus()));
  T5DatasetOptions o = options();
  T5Dataset a(data, specials(), o), b(data, specials(), o);
  o.seed = 99;
  T5Dataset c(data, specials(), o);
  ASSERT_GT(a.size(), 20);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a.num_documents_used(), 59);  // document 7 has a single token
  EXPECT_EQ(a.raw_length(), 141);
  EXPECT_EQ(a.decoder_length(), 29);
  EXPECT_EQ(a.max_spans(), 7);
  std::vector<T5Sample> fwd(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) a.sample_into(i, fwd[i]);
  T5Sample s;
  bool differs = false;
  for (int64_t i = a.size() - 1; i >= 0; --i) {  // backwards into one reused sample
    b.sample_into(i, s);
    EXPECT_EQ(s.input_ids, fwd[i].input_ids) << i;
    EXPECT_EQ(s.attention_mask, fwd[i].attention_mask) << i;
    EXPECT_EQ(s.labels, fwd[i].labels) << i;
    EXPECT_EQ(s.decoder_input_ids, fwd[i].decoder_input_ids) << i;
    EXPECT_EQ(s.decoder_attention_mask, fwd[i].decoder_attention_mask) << i;
    if (i < c.size()) differs |= c.sample(i).input_ids != s.input_ids;
  }
  EXPECT_TRUE(differs);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      T5Sample x;
      for (int64_t i = t; i < a.size(); i += 4) {
        a.sample_into(i, x);
        bad[t] += x.input_ids != fwd[i].input_ids || x.labels != fwd[i].labels;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, (std::vector<int>{0, 0, 0, 0}));
  MFT_EXPECT_ERROR(a.sample_into(a.size(), s), "outside");
  MFT_EXPECT_ERROR(a.sample_into(-1, s), "outside");
}

TEST(T5Dataset, UncorruptingGivesTheRawSampleBack) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  for (auto [enc, dec] : {std::pair<int64_t, int64_t>{128, 0}, {128, 20}, {40, 12}, {512, 0}}) {
    T5DatasetOptions o = options(enc, dec);
    o.short_seq_prob = 0.3;
    o.num_samples = 400;
    T5Dataset ds(data, specials(), o);
    const size_t te = static_cast<size_t>(enc), td = static_cast<size_t>(ds.decoder_length());
    int64_t full = 0, fills_a_length = 0;
    for (int64_t i = 0; i < ds.size(); ++i) {
      const std::string where = "(" + std::to_string(enc) + ", " + std::to_string(dec) + ") sample " + std::to_string(i);
      EXPECT_LE(ds.entry(i).target, ds.raw_length()) << where;
      EXPECT_GE(ds.entry(i).target, 2) << where;
      T5Sample s = ds.sample(i);
      Parsed p = parse(s, te, td, where);
      const std::vector<int64_t> raw = raw_tokens(ds, data, docs, i);
      ASSERT_GE(raw.size(), 2u) << where;
      EXPECT_EQ(p.uncorrupted, raw) << where;
      // The counts of a raw sample of this length (checked against hand-worked values above).
      const mf::T5SpanCounts want = mf::t5_span_counts(static_cast<int64_t>(raw.size()), 0.15, 3.0);
      int64_t noise = 0;
      for (int64_t l : p.noise_lengths) noise += l;
      EXPECT_EQ(noise, want.noise) << where;
      EXPECT_EQ(static_cast<int64_t>(p.noise_lengths.size()), want.spans) << where;
      EXPECT_EQ(p.input_length, static_cast<size_t>(want.input_length)) << where;
      EXPECT_EQ(p.target_length, static_cast<size_t>(want.target_length)) << where;
      full += static_cast<int64_t>(raw.size()) == ds.raw_length();
      fills_a_length += p.input_length == te || p.target_length == td;
    }
    if (ds.raw_length() <= 141) {  // documents are up to 360 tokens: 568 is never reached
      EXPECT_GT(full, 10) << enc << " " << dec;  // samples cut to the full raw length
      EXPECT_GT(fills_a_length, 0) << enc << " " << dec;
    }
  }
  // The hand-worked decoder-bound case: 96 raw tokens, target 20 of 20.
  T5Dataset bound(data, specials(), options(128, 20));
  EXPECT_EQ(bound.raw_length(), 96);
  EXPECT_EQ(bound.decoder_length(), 20);
}

TEST(T5Dataset, NoiseShareSpanLengthsAndRandomSegmentation) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  T5DatasetOptions o = options(128);
  o.num_samples = 3000;
  T5Dataset ds(data, specials(), o);
  int64_t tokens = 0, noise = 0, spans = 0;
  // Random segmentation of N items into m non-empty runs (uniform over compositions): a run has
  // length 1 with probability (m - 1) / (N - 1). Expected and observed counts of such runs.
  double want_ones_noise = 0, var_noise = 0, want_ones_keep = 0, var_keep = 0;
  int64_t ones_noise = 0, ones_keep = 0;
  std::set<int64_t> first_keep;
  for (int64_t i = 0; i < ds.size(); ++i) {
    T5Sample s = ds.sample(i);
    Parsed p = parse(s, 128, 29, "sample " + std::to_string(i));
    int64_t n = static_cast<int64_t>(p.uncorrupted.size()), nn = 0;
    for (int64_t l : p.noise_lengths) nn += l;
    const int64_t m = static_cast<int64_t>(p.noise_lengths.size());
    tokens += n;
    noise += nn;
    spans += m;
    auto account = [&](int64_t items, const std::vector<int64_t>& lengths, double& want, double& var, int64_t& ones) {
      if (items < 2 || m < 2) return;
      const double q = static_cast<double>(m - 1) / static_cast<double>(items - 1);
      want += static_cast<double>(m) * q;
      var += static_cast<double>(m) * q * (1 - q);  // an upper bound's order: runs are close to independent
      for (int64_t l : lengths) ones += l == 1;
    };
    account(nn, p.noise_lengths, want_ones_noise, var_noise, ones_noise);
    account(n - nn, p.keep_lengths, want_ones_keep, var_keep, ones_keep);
    if (n == ds.raw_length()) first_keep.insert(p.keep_lengths[0]);
  }
  const double share = static_cast<double>(noise) / static_cast<double>(tokens);
  const double mean_span = static_cast<double>(noise) / static_cast<double>(spans);
  EXPECT_NEAR(share, 0.15, 0.01);
  EXPECT_NEAR(mean_span, 3.0, 0.25);
  ASSERT_GT(want_ones_noise, 1000);
  EXPECT_NEAR(static_cast<double>(ones_noise), want_ones_noise, 5 * std::sqrt(var_noise) + 5);
  EXPECT_NEAR(static_cast<double>(ones_keep), want_ones_keep, 5 * std::sqrt(var_keep) + 5);
  EXPECT_GT(first_keep.size(), 20u);  // where the first noise span starts varies
}

TEST(T5Dataset, MappingCoversWholeSentencesAndMoreEpochs) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  T5DatasetOptions o = options(64);
  o.short_seq_prob = 0;
  T5Dataset ds(data, specials(), o);
  std::vector<int> seen(static_cast<size_t>(data.num_sequences()), 0);
  const auto& di = data.document_indices();
  for (int64_t i = 0; i < ds.size(); ++i) {
    const auto& e = ds.entry(i);
    EXPECT_EQ(e.target, ds.raw_length());
    for (int64_t s = e.first; s < e.end; ++s) ++seen[s];
  }
  for (int64_t d = 0; d < 60; ++d)
    for (int64_t s = di[d]; s < di[d + 1]; ++s) EXPECT_EQ(seen[s], d == 7 ? 0 : 1) << d << " " << s;
  EXPECT_EQ(ds.samples_per_epoch(), ds.size());
  o.num_samples = ds.size() * 2 + 3;
  T5Dataset more(data, specials(), o);
  EXPECT_EQ(more.size(), o.num_samples);
  EXPECT_GE(more.num_epochs(), 3);
}

TEST(T5BatchSource, DataParallelSlicesConcatenateToTheOneRankBatch) {
  mft::TempDir dir;
  mf::IndexedDataset data(build(dir, corpus()));
  T5DatasetOptions o = options(48, 14);
  o.num_samples = 100;
  T5Dataset ds(data, specials(), o);
  mf::train::T5BatchSource one(ds);
  std::vector<std::unique_ptr<mf::train::T5BatchSource>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<mf::train::T5BatchSource>(ds, r, 3));
  const char* names[] = {"input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels"};
  for (int step = 0; step < 4; ++step) {
    mf::models::Batch whole = one.next(6);
    auto fields = [](const mf::models::Batch& b) {
      return std::vector<mf::Tensor>{b.input_ids, b.attention_mask, b.decoder_input_ids, b.decoder_attention_mask, b.labels};
    };
    std::vector<mf::Tensor> w = fields(whole);
    for (size_t f = 0; f < w.size(); ++f) {
      ASSERT_TRUE(w[f].defined()) << names[f];
      EXPECT_EQ(w[f].dtype(), mf::DType::kI64) << names[f];
      EXPECT_EQ(w[f].shape(), (mf::Shape{6, f < 2 ? int64_t{48} : int64_t{14}})) << names[f];
    }
    EXPECT_FALSE(whole.token_type_ids.defined());
    EXPECT_FALSE(whole.next_sentence_label.defined());
    std::vector<std::vector<int64_t>> cat(w.size());
    for (auto& r : ranks) {
      std::vector<mf::Tensor> part = fields(r->next(2));
      for (size_t f = 0; f < part.size(); ++f) {
        std::vector<int64_t> v = part[f].to_vector<int64_t>();
        cat[f].insert(cat[f].end(), v.begin(), v.end());
      }
    }
    for (size_t f = 0; f < w.size(); ++f) EXPECT_EQ(cat[f], w[f].to_vector<int64_t>()) << names[f] << " step " << step;
    // Row b is sample (step * 6 + b)'s.
    T5Sample s = ds.sample(step * 6 + 5);
    std::vector<int64_t> ids = w[0].to_vector<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(ids.begin() + 5 * 48, ids.end()), s.input_ids);
  }
  // The position is the state: a restored source continues identically.
  mf::train::T5BatchSource resumed(ds, 1, 3);
  resumed.set_position(ranks[1]->position());
  EXPECT_EQ(resumed.next(2).labels.to_vector<int64_t>(), ranks[1]->next(2).labels.to_vector<int64_t>());
}

TEST(T5Dataset, ErrorsNameTheDatasetAndTheProblem) {
  mft::TempDir dir;
  mf::IndexedDataset data(build(dir, {{1}, {1}, {3, 4}}));
  T5DatasetOptions o = options(64);
  o.documents = {0, 2};
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), data.prefix().c_str(), "no document", "2 or more tokens");
  o.documents = {0, 4};
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), data.prefix().c_str(), "outside");
  o.documents = {0, 3};
  EXPECT_EQ(T5Dataset(data, specials(), o).num_documents_used(), 1);
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(2), o), "2 sentinel ids for up to 3 noise spans", "<extra_id_2>");
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(0), o), "0 sentinel ids");
  EXPECT_EQ(T5Dataset(data, specials(3), o).max_spans(), 3);  // 64 -> 70 raw tokens, 10 noise (10.5) in 3 spans
  o.encoder_length = 2;
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), "encoder_length 2", "3 or more");
  o.encoder_length = 64;
  o.decoder_length = 2;
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), "decoder_length 2", "3 or more");
  o.decoder_length = 0;
  o.noise_density = 0;
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), "noise_density 0");
  o.noise_density = 1;
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), "noise_density 1");
  o.noise_density = 0.15;
  o.mean_noise_span_length = 0.5;
  MFT_EXPECT_ERROR((void)T5Dataset(data, specials(), o), "mean_noise_span_length 0.5");
  o.mean_noise_span_length = 3;
  mf::T5SpecialTokens bad = specials();
  bad.eos = bad.pad;
  MFT_EXPECT_ERROR((void)T5Dataset(data, bad, o), "two of pad, eos and the sentinels");
  bad = specials();
  bad.sentinels[5] = bad.sentinels[2];
  MFT_EXPECT_ERROR((void)T5Dataset(data, bad, o), "two of pad, eos and the sentinels");
  bad = specials();
  bad.sentinels[0] = static_cast<int32_t>(kVocab);
  MFT_EXPECT_ERROR((void)T5Dataset(data, bad, o), "<extra_id_0>", "outside the vocabulary");
}

TEST(T5Sentinels, FromATokenizer) {
  mf::ByteTokenizer bytes;
  EXPECT_TRUE(mf::t5_sentinel_ids(bytes).empty());
  // A tokenizer.json with <extra_id_0..2> as the last ids (Hugging Face's T5 convention).
  using nlohmann::json;
  json vocab = json::object();
  const auto& alphabet = mf::Gpt2BpeTokenizer::byte_to_unicode();
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = b;
  vocab["\xc4\xa0" "a"] = 256;
  json added = json::array();
  added.push_back({{"id", 257}, {"content", "</s>"}, {"special", true}});
  for (int k = 0; k < 3; ++k)
    added.push_back({{"id", 260 - k}, {"content", "<extra_id_" + std::to_string(k) + ">"}, {"special", true}});
  added.push_back({{"id", 261}, {"content", "<extra_id_4>"}, {"special", true}});  // after a gap: not taken
  json j = {{"added_tokens", added},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xc4\xa0 a"}}}}};
  mft::TempDir dir;
  mft::write_text(dir.file("tokenizer.json"), j.dump());
  mf::HfBpeTokenizer tok = mf::HfBpeTokenizer::from_file(dir.file("tokenizer.json"), "</s>");
  EXPECT_EQ(mf::t5_sentinel_ids(tok), (std::vector<int32_t>{260, 259, 258}));
}

}  // namespace
