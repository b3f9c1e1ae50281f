// GptDataset (seeded, boundary-crossing fixed-length samples), the train/valid/test split and
// the data-parallel Sampler with its saved position.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data_testing.h"
#include "meshflow/data/gpt_dataset.h"
#include "meshflow/data/sampler.h"
#include "meshflow/data/split.h"
#include "testing.h"

namespace {

// Document d holds tokens d*1000 + k, k = 0..len-1: every token names its document and place.
std::vector<int64_t> kLens = {7, 1, 30, 12, 5, 0, 19, 3, 44, 8};

std::string build_docs(const mft::TempDir& dir) {
  std::string prefix = dir.file("docs");
  mf::IndexedDatasetBuilder b(prefix, mf::IndexDType::kI32);
  for (size_t d = 0; d < kLens.size(); ++d) {
    std::vector<int32_t> t;
    for (int64_t k = 0; k < kLens[d]; ++k) t.push_back(static_cast<int32_t>(d * 1000 + k));
    b.add_document(t);
  }
  b.finalize();
  return prefix;
}

int64_t doc_of(int32_t t) { return t / 1000; }
int64_t pos_of(int32_t t) { return t % 1000; }

TEST(GptDataset, SamplesAreDeterministicFromTheSeed) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  mf::GptDataset a(data, 8, 1234, 0, {0, 10}), b(data, 8, 1234, 0, {0, 10}), c(data, 8, 99, 0, {0, 10});
  ASSERT_EQ(a.size(), (129 - 1) / 8);
  bool differs = false;
  for (int64_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.sample(i).size(), 9u);
    EXPECT_EQ(a.sample(i), b.sample(i));
    differs |= a.sample(i) != c.sample(i);
  }
  EXPECT_TRUE(differs);
  MFT_EXPECT_ERROR(a.sample(a.size()), "outside");
}

// Within a sample each next token continues its document or starts another at position 0
// right after the previous one ended.
void expect_contiguous(const std::vector<int32_t>& s, int& crossings) {
  for (size_t k = 1; k < s.size(); ++k) {
    int32_t p = s[k - 1], q = s[k];
    if (doc_of(q) == doc_of(p) && pos_of(q) == pos_of(p) + 1) continue;
    EXPECT_EQ(pos_of(p), kLens[doc_of(p)] - 1) << "sample jumps out of a document early at " << p << " -> " << q;
    EXPECT_EQ(pos_of(q), 0) << "sample enters a document late at " << p << " -> " << q;
    ++crossings;
  }
}

TEST(GptDataset, CrossesDocumentBoundariesAndCoversAnEpoch) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  const int64_t L = 8;
  mf::GptDataset ds(data, L, 7, 0, {0, 10});
  EXPECT_EQ(ds.num_epochs(), 1);
  std::map<int32_t, int> seen;
  int crossings = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::vector<int32_t> s = ds.sample(i);
    expect_contiguous(s, crossings);
    for (int64_t k = 0; k < L; ++k) ++seen[s[k]];  // inputs: each stream token once
  }
  EXPECT_GT(crossings, 5);
  int64_t total = 0;
  for (auto& [tok, n] : seen) {
    EXPECT_EQ(n, 1) << tok;
    total += n;
  }
  EXPECT_EQ(total, ds.size() * L);
  EXPECT_GE(total, 129 - L);  // all but the tail of the last document
}

TEST(GptDataset, RunsAsManyEpochsAsNeeded) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  const int64_t L = 10;
  mf::GptDataset ds(data, L, 3, 30, {0, 10});  // 30 samples need 301 tokens: 3 epochs of 129
  EXPECT_EQ(ds.num_epochs(), 3);
  std::map<int32_t, int> seen;
  int crossings = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::vector<int32_t> s = ds.sample(i);
    ASSERT_EQ(s.size(), 11u);
    expect_contiguous(s, crossings);
    for (int64_t k = 0; k < L; ++k) ++seen[s[k]];
  }
  for (auto& [tok, n] : seen) EXPECT_LE(n, 3) << tok;
  EXPECT_EQ(seen.size(), 129u);  // every token of every document appears
}

TEST(GptDataset, UsesOnlyItsDocumentRange) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  mf::GptDataset ds(data, 4, 5, 0, {2, 5});  // 30 + 12 + 5 tokens
  EXPECT_EQ(ds.tokens_per_epoch(), 47);
  EXPECT_EQ(ds.size(), 46 / 4);
  for (int64_t i = 0; i < ds.size(); ++i)
    for (int32_t t : ds.sample(i)) EXPECT_TRUE(doc_of(t) >= 2 && doc_of(t) < 5) << t;
  MFT_EXPECT_ERROR(mf::GptDataset(data, 4, 5, 0, {3, 3}), "empty");
  MFT_EXPECT_ERROR(mf::GptDataset(data, 4, 5, 0, {0, 11}), "outside");
  MFT_EXPECT_ERROR(mf::GptDataset(data, 8, 5, 0, {7, 8}), "fewer than seq_length + 1");
}

// An index larger than the host's memory is refused at once (it once spent minutes filling one, or
// threw a bare std::bad_alloc); a sample count whose tokens overflow int64 too.
TEST(GptDataset, AnIndexTheHostCannotHoldIsRefused) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  const int64_t n = int64_t{1} << 50;  // 2^50 samples x 24 bytes: 27 PB
  MFT_EXPECT_ERROR(mf::GptDataset(data, 4, 5, n, {0, 10}), data.prefix().c_str(), "1125899906842624 samples of 4 tokens",
                   "need an index of", "; this host has", "fewer samples");
  MFT_EXPECT_ERROR(mf::GptDataset(data, 100, 5, int64_t{1} << 60, {0, 10}), "more tokens than int64 counts");
}

TEST(Split, FollowsMegatron) {
  auto s = mf::split_documents("949,50,1", 1000);
  EXPECT_EQ(s[0], (mf::DocumentRange{0, 949}));
  EXPECT_EQ(s[1], (mf::DocumentRange{949, 999}));
  EXPECT_EQ(s[2], (mf::DocumentRange{999, 1000}));
  s = mf::split_documents("949,50,1", 100);
  EXPECT_EQ(s[0], (mf::DocumentRange{0, 95}));
  EXPECT_EQ(s[1], (mf::DocumentRange{95, 100}));
  EXPECT_EQ(s[2].size(), 0);
  s = mf::split_documents("8/1/1", 10);
  EXPECT_EQ(s[1], (mf::DocumentRange{8, 9}));
  s = mf::split_documents("1", 17);
  EXPECT_EQ(s[0], (mf::DocumentRange{0, 17}));
  EXPECT_EQ(s[2], (mf::DocumentRange{17, 17}));
  s = mf::split_documents("0,1,1", 3);
  EXPECT_EQ(s[0].begin, 0);
  EXPECT_EQ(s[2].end, 3);
  for (int k = 0; k < 3; ++k) EXPECT_GE(s[k].size(), 0);
  MFT_EXPECT_ERROR(mf::split_documents("a,b", 10), "'a'");
  MFT_EXPECT_ERROR(mf::split_documents("1,-1", 10), "'-1'");
  MFT_EXPECT_ERROR(mf::split_documents("1,1,1,1", 10), "at most 3");
  MFT_EXPECT_ERROR(mf::split_documents("0,0", 10), "sum to 0");
}

TEST(Sampler, SlicesGlobalMicroBatchesByRank) {
  mf::Sampler r0(100, 0, 2), r1(100, 1, 2);
  EXPECT_EQ(r0.next_batch(3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r1.next_batch(3), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(r0.next_batch(3), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(r1.next_batch(3), (std::vector<int64_t>{9, 10, 11}));
  EXPECT_EQ(r0.state(), 12u);
  MFT_EXPECT_ERROR(mf::Sampler(10, 2, 2), "rank 2");
  MFT_EXPECT_ERROR(mf::Sampler(0), "total_samples");
}

TEST(Sampler, CoversEverySampleOnceAcrossRanksThenWraps) {
  const int world = 4, mb = 2, total = 24;
  std::vector<mf::Sampler> s;
  for (int r = 0; r < world; ++r) s.emplace_back(total, r, world);
  std::multiset<int64_t> seen;
  for (int step = 0; step < total / (mb * world); ++step)
    for (auto& x : s)
      for (int64_t i : x.next_batch(mb)) seen.insert(i);
  EXPECT_EQ(seen.size(), static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) EXPECT_EQ(seen.count(i), 1u);
  EXPECT_EQ(s[0].next_batch(mb), (std::vector<int64_t>{0, 1}));  // next epoch
}

TEST(Sampler, RestoredStateContinuesIdentically) {
  mft::TempDir dir;
  mf::IndexedDataset data(build_docs(dir));
  mf::GptDataset ds(data, 6, 11, 50, {0, 10});
  mf::Sampler a(ds.size(), 1, 3);
  for (int i = 0; i < 4; ++i) a.next_batch(2);
  uint64_t saved = a.state();
  std::vector<std::vector<int32_t>> expect;
  for (int i = 0; i < 5; ++i)
    for (int64_t idx : a.next_batch(2)) expect.push_back(ds.sample(idx));
  mf::Sampler b(ds.size(), 1, 3);
  b.set_state(saved);
  mf::GptDataset ds2(data, 6, 11, 50, {0, 10});  // rebuilt after a "restart"
  std::vector<std::vector<int32_t>> got;
  for (int i = 0; i < 5; ++i)
    for (int64_t idx : b.next_batch(2)) got.push_back(ds2.sample(idx));
  EXPECT_EQ(got, expect);
  EXPECT_EQ(mf::Sampler(ds.size(), 1, 3, saved).next_batch(2), mf::Sampler(ds.size(), 1, 3, saved).next_batch(2));
}

}  // namespace
