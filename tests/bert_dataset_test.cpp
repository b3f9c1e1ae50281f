// BertDataset (Megatron's BERT samples: sentence mapping, A/B segments with next-sentence labels,
// truncation, whole-word masking), the special tokens from a tokenizer, and the tokenizers'
// token_to_id / id_to_token lookups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "data_testing.h"
#include "meshflow/data/bert_dataset.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/data/sentencepiece.h"
#include "meshflow/data/wordpiece.h"
#include "testing.h"

namespace {

using mf::BertDataset;
using mf::BertDatasetOptions;
using mf::BertSample;

// Token k of sentence s of document d: every token names its document, sentence and place.
int32_t tok_of(int64_t d, int64_t s, int64_t k) { return static_cast<int32_t>(10000 * (d + 1) + 100 * s + k); }
int64_t doc_of(int64_t t) { return t / 10000 - 1; }
int64_t sent_of(int64_t t) { return (t / 100) % 100; }
int64_t pos_of(int64_t t) { return t % 100; }

constexpr int32_t kPad = 0, kCls = 1, kSep = 2, kMask = 3;
constexpr int64_t kVocab = 1 << 20;

mf::BertSpecialTokens specials(bool pairs_of_pieces = false) {
  mf::BertSpecialTokens s;
  s.cls = kCls, s.sep = kSep, s.mask = kMask, s.pad = kPad, s.vocab_size = kVocab;
  if (pairs_of_pieces) {  // odd places continue the word of the even place before them
    s.continues_word.assign(kVocab, false);
    for (int64_t t = 10000; t < kVocab; ++t) s.continues_word[t] = pos_of(t) % 2 == 1;
  }
  return s;
}

// docs[d] = the lengths of document d's sentences.
std::string build(const mft::TempDir& dir, const std::vector<std::vector<int>>& docs) {
  std::string prefix = dir.file("bert");
  mf::IndexedDatasetBuilder b(prefix, mf::IndexDType::kI32);
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<std::vector<int32_t>> sentences;
    for (size_t s = 0; s < docs[d].size(); ++s) {
      sentences.emplace_back();
      for (int k = 0; k < docs[d][s]; ++k) sentences.back().push_back(tok_of(d, s, k));
    }
    b.add_document(sentences);
  }
  b.finalize();
  return prefix;
}

// 40 documents of 1..8 sentences of 3..30 tokens (document 5 has one sentence).
std::vector<std::vector<int>> corpus() {
  std::vector<std::vector<int>> docs;
  for (int d = 0; d < 40; ++d) {
    int n = d == 5 ? 1 : 2 + (d * 7) % 7;
    docs.emplace_back();
    for (int s = 0; s < n; ++s) docs.back().push_back(3 + (d * 13 + s * 11) % 28);
  }
  return docs;
}

BertDatasetOptions options(int64_t seq_length = 64) {
  BertDatasetOptions o;
  o.seq_length = seq_length;
  o.documents = {0, 40};
  return o;
}

bool is_special(int64_t t) { return t == kCls || t == kSep || t == kPad || t == kMask; }

// The original token at each real position (labels hold it where a prediction replaced it).
std::vector<int64_t> originals(const BertSample& s) {
  std::vector<int64_t> o(s.input_ids.size());
  for (size_t k = 0; k < o.size(); ++k) o[k] = s.labels[k] != BertDataset::kIgnoreLabel ? s.labels[k] : s.input_ids[k];
  return o;
}

struct Parsed {
  std::vector<int64_t> a, b;  // original tokens of the segments
  size_t num_tokens = 0;
};

// Checks the layout [CLS] A [SEP] (B [SEP]) [PAD]..., token types and attention; returns A, B.
Parsed parse(const BertSample& s, int64_t seq_length, bool pairs) {
  Parsed p;
  const size_t L = static_cast<size_t>(seq_length);
  EXPECT_EQ(s.input_ids.size(), L);
  EXPECT_EQ(s.token_type_ids.size(), L);
  EXPECT_EQ(s.attention_mask.size(), L);
  EXPECT_EQ(s.labels.size(), L);
  std::vector<int64_t> orig = originals(s);
  EXPECT_EQ(orig[0], kCls);
  size_t k = 1;
  while (k < L && orig[k] != kSep) p.a.push_back(orig[k++]);
  EXPECT_LT(k, L);
  ++k;
  if (pairs) {
    while (k < L && orig[k] != kSep) p.b.push_back(orig[k++]);
    EXPECT_LT(k, L);
    ++k;
  }
  p.num_tokens = k;
  for (size_t j = 0; j < L; ++j) {
    bool real = j < k;
    EXPECT_EQ(s.attention_mask[j], real ? 1 : 0) << j;
    EXPECT_EQ(s.token_type_ids[j], real && j > p.a.size() + 1 ? 1 : 0) << j;
    if (!real) {
      EXPECT_EQ(s.input_ids[j], kPad);
      EXPECT_EQ(s.labels[j], BertDataset::kIgnoreLabel);
    }
  }
  for (int64_t t : p.a) EXPECT_FALSE(is_special(t));
  for (int64_t t : p.b) EXPECT_FALSE(is_special(t));
  return p;
}

// Tokens of a segment follow each other in their document (sentence after sentence, a sentence
// cut only at the segment's ends); returns false otherwise.
bool contiguous(const std::vector<int64_t>& seg, const std::vector<std::vector<int>>& docs) {
  for (size_t k = 1; k < seg.size(); ++k) {
    int64_t p = seg[k - 1], q = seg[k];
    if (doc_of(p) != doc_of(q)) return false;
    bool next_in_sentence = sent_of(q) == sent_of(p) && pos_of(q) == pos_of(p) + 1;
    bool next_sentence = sent_of(q) == sent_of(p) + 1 && pos_of(q) == 0 &&
                         pos_of(p) == docs[doc_of(p)][sent_of(p)] - 1;
    if (!next_in_sentence && !next_sentence) return false;
  }
  return true;
}

TEST(BertDataset, DeterministicAndIndependentOfOrder) {
  mft::TempDir dir;
  mf::IndexedDataset data(build(dir, corpus()));
  BertDatasetOptions o = options();
  BertDataset a(data, specials(), o), b(data, specials(), o);
  o.seed = 99;
  BertDataset c(data, specials(), o);
  ASSERT_GT(a.size(), 10);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a.num_documents_used(), 39);  // document 5 has one sentence
  // Backwards into one reused sample, from several threads: the same as forwards.
  std::vector<BertSample> fwd(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) a.sample_into(i, fwd[i]);
  BertSample s;
  bool differs = false;
  for (int64_t i = a.size() - 1; i >= 0; --i) {
    b.sample_into(i, s);
    EXPECT_EQ(s.input_ids, fwd[i].input_ids) << i;
    EXPECT_EQ(s.labels, fwd[i].labels) << i;
    EXPECT_EQ(s.token_type_ids, fwd[i].token_type_ids) << i;
    EXPECT_EQ(s.next_sentence_label, fwd[i].next_sentence_label) << i;
    if (i < c.size()) differs |= c.sample(i).input_ids != s.input_ids;
  }
  EXPECT_TRUE(differs);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      BertSample x;
      for (int64_t i = t; i < a.size(); i += 4) {
        a.sample_into(i, x);
        bad[t] += x.input_ids != fwd[i].input_ids || x.labels != fwd[i].labels;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, (std::vector<int>{0, 0, 0, 0}));
  MFT_EXPECT_ERROR(a.sample_into(a.size(), s), "outside");
}

TEST(BertDataset, MappingCoversWholeSentencesOfOneDocument) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  BertDataset ds(data, specials(), options());
  // One epoch: every sentence of every used document exactly once.
  std::vector<int> seen(static_cast<size_t>(data.num_sequences()), 0);
  const auto& di = data.document_indices();
  for (int64_t i = 0; i < ds.size(); ++i) {
    const auto& e = ds.entry(i);
    EXPECT_GE(e.end - e.first, 2);
    EXPECT_GE(e.target, 2);
    EXPECT_LE(e.target, 64 - 3);
    auto d = std::upper_bound(di.begin(), di.end(), e.first) - di.begin() - 1;
    EXPECT_LE(e.end, di[d + 1]) << "sample crosses a document end";
    for (int64_t s = e.first; s < e.end; ++s) ++seen[s];
  }
  for (int64_t d = 0; d < 40; ++d)
    for (int64_t s = di[d]; s < di[d + 1]; ++s) EXPECT_EQ(seen[s], d == 5 ? 0 : 1) << d << " " << s;
  EXPECT_EQ(ds.samples_per_epoch(), ds.size());

  // More samples than an epoch: more epochs, exactly num_samples.
  BertDatasetOptions o = options();
  o.num_samples = ds.size() * 2 + 3;
  BertDataset more(data, specials(), o);
  EXPECT_EQ(more.size(), o.num_samples);
  EXPECT_GE(more.num_epochs(), 3);
}

TEST(BertDataset, StructureAndNextSentenceLabels) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  BertDatasetOptions o = options(48);
  o.masked_lm_prob = 0;
  o.num_samples = 4000;
  BertDataset ds(data, specials(), o);
  int64_t random_next = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    Parsed p = parse(s, 48, true);
    ASSERT_FALSE(p.a.empty());
    ASSERT_FALSE(p.b.empty());
    EXPECT_LE(p.a.size() + p.b.size(), static_cast<size_t>(ds.entry(i).target));
    for (int64_t l : s.labels) EXPECT_EQ(l, BertDataset::kIgnoreLabel);
    EXPECT_TRUE(contiguous(p.a, docs)) << i;
    EXPECT_TRUE(contiguous(p.b, docs)) << i;
    EXPECT_EQ(doc_of(p.a[0]), doc_of(p.b[0]));
    // Label 0: B's sentences come after A's; label 1: B holds the sentences before A.
    if (s.next_sentence_label == 0) {
      EXPECT_LT(sent_of(p.a.back()), sent_of(p.b.front())) << i;
    } else {
      EXPECT_EQ(s.next_sentence_label, 1);
      EXPECT_GT(sent_of(p.a.front()), sent_of(p.b.back())) << i;
      ++random_next;
    }
  }
  double rate = static_cast<double>(random_next) / static_cast<double>(ds.size());
  EXPECT_NEAR(rate, 0.5, 0.04);  // 5 sigma at n = 4000
}

TEST(BertDataset, TruncationKeepsSamplesWithinTheTarget) {
  mft::TempDir dir;
  // Long sentences: every sample must be cut down.
  std::vector<std::vector<int>> docs(20, std::vector<int>{40, 35, 50, 45});
  mf::IndexedDataset data(build(dir, docs));
  BertDatasetOptions o = options(32);
  o.documents = {0, 20};
  o.masked_lm_prob = 0;
  o.short_seq_prob = 0.5;
  o.num_samples = 500;
  BertDataset ds(data, specials(), o);
  int64_t short_targets = 0, cut_front = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    Parsed p = parse(s, 32, true);
    const int32_t target = ds.entry(i).target;
    EXPECT_LE(p.a.size() + p.b.size(), static_cast<size_t>(target));
    EXPECT_EQ(p.a.size() + p.b.size(), static_cast<size_t>(target)) << "cut more than needed";
    EXPECT_GE(p.a.size(), 1u);
    EXPECT_GE(p.b.size(), 1u);
    EXPECT_LE(std::max(p.a.size(), p.b.size()) - std::min(p.a.size(), p.b.size()), 1u);  // the longer one is cut
    EXPECT_TRUE(contiguous(p.a, docs) && contiguous(p.b, docs)) << i;
    short_targets += target < 29;
    cut_front += pos_of(p.a.front()) != 0;
  }
  EXPECT_GT(short_targets, 100);  // short_seq_prob 0.5 over 500 samples
  EXPECT_GT(cut_front, 50);       // the front is cut too, not only the back
}

TEST(BertDataset, MaskingRateAndEightyTenTen) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  BertDatasetOptions o = options(64);
  o.whole_word_masking = false;
  o.num_samples = 6000;
  BertDataset ds(data, specials(), o);
  int64_t predicted = 0, text_tokens = 0, as_mask = 0, kept = 0, random = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    Parsed p = parse(s, 64, true);
    int64_t n = 0;
    for (size_t k = 0; k < s.labels.size(); ++k) {
      if (s.labels[k] == BertDataset::kIgnoreLabel) continue;
      ++n;
      EXPECT_FALSE(is_special(s.labels[k])) << "a special token predicted";
      if (s.input_ids[k] == kMask) ++as_mask;
      else if (s.input_ids[k] == s.labels[k]) ++kept;
      else ++random;
    }
    // Megatron's count: min(floor(p * target), max(1, round(p * tokens))).
    int64_t want = std::min<int64_t>(static_cast<int64_t>(std::floor(0.15 * ds.entry(i).target)),
                                     std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(0.15 * static_cast<double>(p.num_tokens)))));
    EXPECT_EQ(n, want) << i;
    predicted += n;
    text_tokens += static_cast<int64_t>(p.a.size() + p.b.size());
  }
  double rate = static_cast<double>(predicted) / static_cast<double>(text_tokens);
  EXPECT_GT(rate, 0.13);
  EXPECT_LT(rate, 0.18);
  ASSERT_GT(predicted, 20000);
  const double np = static_cast<double>(predicted);
  // 5 sigma bounds: sqrt(0.16 / 20000) = 0.0028, sqrt(0.09 / 20000) = 0.0021.
  EXPECT_NEAR(as_mask / np, 0.8, 0.015);
  EXPECT_NEAR(kept / np, 0.1, 0.011);
  EXPECT_NEAR(random / np, 0.1, 0.011);
}

TEST(BertDataset, WholeWordMaskingMasksContinuationsWithTheirWord) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  BertDatasetOptions o = options(64);
  o.num_samples = 1000;
  BertDataset ds(data, specials(/*pairs_of_pieces=*/true), o);
  mf::BertSpecialTokens sp = specials(true);
  int64_t continuations = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    std::vector<int64_t> orig = originals(s);
    for (size_t k = 1; k + 1 < orig.size(); ++k) {
      bool pk = s.labels[k] != BertDataset::kIgnoreLabel;
      // A continuation piece is predicted exactly when the token it continues is.
      if (!is_special(orig[k]) && orig[k] >= 10000 && sp.continues_word[orig[k]] && !is_special(orig[k - 1])) {
        bool prev = s.labels[k - 1] != BertDataset::kIgnoreLabel;
        EXPECT_EQ(pk, prev) << "sample " << i << " position " << k;
        continuations += pk;
      }
    }
  }
  EXPECT_GT(continuations, 100);
}

TEST(BertDataset, SingleSegmentWithoutBinaryHead) {
  mft::TempDir dir;
  auto docs = corpus();
  mf::IndexedDataset data(build(dir, docs));
  BertDatasetOptions o = options(40);
  o.binary_head = false;
  o.masked_lm_prob = 0;
  BertDataset ds(data, specials(), o);
  EXPECT_EQ(ds.num_documents_used(), 40);  // one-sentence documents count too
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    Parsed p = parse(s, 40, false);
    EXPECT_EQ(s.next_sentence_label, 0);
    EXPECT_LE(p.a.size(), 38u);
    EXPECT_TRUE(contiguous(p.a, docs));
    for (int64_t t : s.token_type_ids) EXPECT_EQ(t, 0);
  }
}

TEST(BertDataset, ErrorsNameTheDatasetAndTheProblem) {
  mft::TempDir dir;
  mf::IndexedDataset data(build(dir, {{5}, {7}, {3, 4}}));
  BertDatasetOptions o = options();
  o.documents = {0, 2};
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), data.prefix().c_str(), "no document", "--split-sentences");
  o.documents = {0, 4};
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), data.prefix().c_str(), "outside");
  o.documents = {0, 3};
  o.seq_length = 4;
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), "seq_length 4 too small");
  o.seq_length = 64;
  o.masked_lm_prob = 1.5;
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), "masked_lm_prob");
  o.masked_lm_prob = 0.15;
  mf::BertSpecialTokens bad = specials();
  bad.mask = -1;
  MFT_EXPECT_ERROR((void)BertDataset(data, bad, o), "[MASK]");
  o.long_sentence_len = 3;
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), "none longer than 3 tokens");
  o.long_sentence_len = 4;
  EXPECT_EQ(BertDataset(data, specials(), o).num_documents_used(), 1);
  o.num_samples = int64_t{1} << 50;  // a mapping of petabytes: refused before an epoch is mapped
  MFT_EXPECT_ERROR((void)BertDataset(data, specials(), o), "1125899906842624 samples need a sample mapping of",
                   "; this host has");
}

// ---- tokenizer lookups and the special tokens ----

TEST(TokenizerLookup, ByteAndGpt2) {
  mf::ByteTokenizer bytes;
  EXPECT_FALSE(bytes.token_to_id("A").has_value());
  EXPECT_EQ(bytes.id_to_token('A'), "A");
  MFT_EXPECT_ERROR(mf::bert_special_tokens(bytes), "byte", "[CLS]");
  mf::Gpt2BpeTokenizer gpt2 = mf::Gpt2BpeTokenizer::from_directory(mft::gpt2_vocab_dir());
  EXPECT_EQ(gpt2.token_to_id("<|endoftext|>"), 50256);
  EXPECT_EQ(gpt2.token_to_id("\xc4\xa0the"), 262);  // "Ġthe"
  EXPECT_FALSE(gpt2.token_to_id(" the").has_value());  // bytes, not the vocab.json spelling
  EXPECT_EQ(gpt2.id_to_token(262), "\xc4\xa0the");
  EXPECT_EQ(gpt2.id_to_token(50256), "<|endoftext|>");
  MFT_EXPECT_ERROR(gpt2.id_to_token(50257), "outside");
  MFT_EXPECT_ERROR(mf::bert_special_tokens(gpt2), "gpt2-bpe", "[CLS]");
}

TEST(TokenizerLookup, RobertaStyleHfBpeSpecialTokens) {
  using nlohmann::json;
  json vocab = json::object();
  const auto& alphabet = mf::Gpt2BpeTokenizer::byte_to_unicode();
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = b;
  vocab["\xc4\xa0" "a"] = 256;
  json added = json::array();
  const char* names[] = {"<s>", "<pad>", "</s>", "<mask>"};
  for (int k = 0; k < 4; ++k) added.push_back({{"id", 257 + k}, {"content", names[k]}, {"special", true}});
  json j = {{"added_tokens", added},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xc4\xa0 a"}}}}};
  mft::TempDir dir;
  mft::write_text(dir.file("tokenizer.json"), j.dump());
  mf::HfBpeTokenizer tok = mf::HfBpeTokenizer::from_file(dir.file("tokenizer.json"), "</s>");
  EXPECT_EQ(tok.token_to_id("\xc4\xa0" "a"), 256);
  EXPECT_EQ(tok.id_to_token(256), "\xc4\xa0" "a");
  EXPECT_EQ(tok.id_to_token(260), "<mask>");
  EXPECT_FALSE(tok.token_to_id("[CLS]").has_value());
  mf::BertSpecialTokens s = mf::bert_special_tokens(tok);
  EXPECT_EQ(s.cls, 257);
  EXPECT_EQ(s.pad, 258);
  EXPECT_EQ(s.sep, 259);
  EXPECT_EQ(s.mask, 260);
  EXPECT_EQ(s.vocab_size, 261);
  EXPECT_TRUE(s.continues_word.empty());
}

TEST(TokenizerLookup, SentencePiecePieces) {
  const std::string path = std::string(MESHFLOW_SOURCE_DIR) + "/data/tokenizers/llama2/tokenizer.model";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing: run scripts/fetch-tokenizers.sh";
  mf::SentencePieceTokenizer sp = mf::SentencePieceTokenizer::from_file(path);
  EXPECT_EQ(sp.token_to_id("<s>"), 1);
  EXPECT_EQ(sp.token_to_id("</s>"), 2);
  EXPECT_EQ(sp.id_to_token(2), "</s>");
  EXPECT_FALSE(sp.token_to_id("definitely-not-a-piece").has_value());
  for (int32_t id : {0, 3, 278, 1000, 31999}) EXPECT_EQ(sp.token_to_id(sp.id_to_token(id)), id);
  MFT_EXPECT_ERROR(sp.id_to_token(32000), "outside");
}

const mf::WordPieceTokenizer* bert_or_skip() {
  static const std::string path = std::string(MESHFLOW_SOURCE_DIR) + "/data/tokenizers/bert/vocab.txt";
  if (!std::filesystem::exists(path)) return nullptr;
  static const mf::WordPieceTokenizer tok = mf::WordPieceTokenizer::from_file(path);
  return &tok;
}

TEST(WordPieceLookup, TokenToIdAndBack) {
  const mf::WordPieceTokenizer* bert = bert_or_skip();
  if (!bert) GTEST_SKIP() << "data/tokenizers/bert/vocab.txt missing: run scripts/fetch-tokenizers.sh";
  EXPECT_EQ(bert->token_to_id("[PAD]"), 0);
  EXPECT_EQ(bert->token_to_id("[CLS]"), 101);
  EXPECT_EQ(bert->token_to_id("[SEP]"), 102);
  EXPECT_EQ(bert->token_to_id("[MASK]"), 103);
  EXPECT_EQ(bert->token_to_id("the"), 1996);
  EXPECT_EQ(bert->token_to_id("##s"), 2015);
  EXPECT_FALSE(bert->token_to_id("The").has_value());  // exact text: the uncased vocabulary has no "The"
  EXPECT_FALSE(bert->token_to_id("").has_value());
  EXPECT_EQ(bert->id_to_token(2015), "##s");
  EXPECT_EQ(bert->id_to_token(101), "[CLS]");
  MFT_EXPECT_ERROR(bert->id_to_token(30522), "outside");
  for (int32_t id : {0, 100, 1996, 2015, 30521}) EXPECT_EQ(bert->token_to_id(bert->id_to_token(id)), id);
  mf::BertSpecialTokens s = mf::bert_special_tokens(*bert);
  EXPECT_EQ(s.cls, 101);
  EXPECT_EQ(s.sep, 102);
  EXPECT_EQ(s.mask, 103);
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.vocab_size, 30522);
  ASSERT_EQ(s.continues_word.size(), 30522u);
  EXPECT_TRUE(s.continues_word[2015]);
  EXPECT_FALSE(s.continues_word[1996]);
  EXPECT_FALSE(s.continues_word[101]);
}

TEST(WordPieceLookup, PreprocessedSentencesGiveBertSamples) {
  const mf::WordPieceTokenizer* bert = bert_or_skip();
  if (!bert) GTEST_SKIP() << "data/tokenizers/bert/vocab.txt missing: run scripts/fetch-tokenizers.sh";
  mft::TempDir dir;
  mft::write_text(dir.file("in.txt"),
                  "The cat sat on the mat. It was happy! Then it slept.\n%\n"
                  "Tokenization splits unbelievably long words. Dr. Smith agreed. Nobody else did.\n");
  mf::PreprocessOptions po;
  po.split_sentences = true;
  po.append_eod = false;
  mf::PreprocessResult r = mf::preprocess({dir.file("in.txt")}, dir.file("wp"), *bert, po);
  mf::IndexedDataset data(r.prefix);
  EXPECT_EQ(data.document_indices(), (std::vector<int64_t>{0, 3, 6}));
  BertDatasetOptions o;
  o.seq_length = 32;
  o.documents = {0, 2};
  o.num_samples = 50;
  BertDataset ds(data, mf::bert_special_tokens(*bert), o);
  for (int64_t i = 0; i < ds.size(); ++i) {
    BertSample s = ds.sample(i);
    EXPECT_EQ(s.input_ids[0], 101);
    int seps = 0;
    for (int64_t t : s.input_ids) seps += t == 102;
    EXPECT_EQ(seps, 2);
  }
}

}  // namespace
