// ClassificationDataset (jsonl examples -> [CLS] text [SEP] pad samples, seeded per-epoch
// shuffles, errors naming file:line) and scripts/make_fortune_classification.sh (a real 4-class
// task from the fortune databases).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "data_testing.h"
#include "meshflow/data/classification_dataset.h"
#include "testing.h"

namespace {

// Bytes 0..255, the end-of-document id 256 and three special ids after them.
class TestTokenizer final : public mf::Tokenizer {
 public:
  static constexpr int32_t kCls = 257, kSep = 258, kPad = 259;
  std::vector<int32_t> encode(std::string_view text) const override { return bytes_.encode(text); }
  std::string decode(std::span<const int32_t> ids) const override { return bytes_.decode(ids); }
  int64_t vocab_size() const override { return 260; }
  int32_t eod_id() const override { return mf::ByteTokenizer::kEod; }
  std::string name() const override { return "test"; }

 private:
  mf::ByteTokenizer bytes_;
};

mf::ClassificationDataset make(const std::string& path, const mf::ClassificationOptions& o) {
  TestTokenizer tok;
  return mf::ClassificationDataset(path, tok, TestTokenizer::kCls, TestTokenizer::kSep, TestTokenizer::kPad, o);
}

mf::ClassificationOptions opts(int64_t seq_length, int64_t num_samples = 0, uint64_t seed = 1234) {
  mf::ClassificationOptions o;
  o.seq_length = seq_length;
  o.num_samples = num_samples;
  o.seed = seed;
  return o;
}

std::vector<int64_t> ids_of(const std::string& s) { return {s.begin(), s.end()}; }

// Example k: text "ex<k>" (4 or 5 bytes), label k % 3.
std::string numbered_file(const mft::TempDir& dir, int n) {
  std::string text;
  for (int k = 0; k < n; ++k) text += nlohmann::json{{"text", "ex" + std::to_string(k)}, {"label", k % 3}}.dump() + "\n";
  std::string path = dir.file("numbered.jsonl");
  mft::write_text(path, text);
  return path;
}

TEST(ClassificationDataset, SampleLayoutIsClsTextSepThenPadding) {
  mft::TempDir dir;
  std::string path = dir.file("a.jsonl");
  mft::write_text(path, "{\"text\": \"abc\", \"label\": 1}\n\n  \n{\"label\": 0, \"text\": \"\", \"extra\": [1]}\n"
                        "{\"text\": \"tab\\there \\u00e9\", \"label\": 3}");  // no final newline
  auto d = make(path, opts(8));
  ASSERT_EQ(d.num_examples(), 3);
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.num_epochs(), 1);

  const int64_t C = TestTokenizer::kCls, S = TestTokenizer::kSep, P = TestTokenizer::kPad;
  mf::ClassificationSample s = d.sample(0);
  EXPECT_EQ(s.input_ids, (std::vector<int64_t>{C, 'a', 'b', 'c', S, P, P, P}));
  EXPECT_EQ(s.attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(s.token_type_ids, std::vector<int64_t>(8, 0));
  EXPECT_EQ(s.label, 1);

  d.sample_into(1, s);  // an empty text: [CLS] [SEP]; the vectors are refilled, not appended to
  EXPECT_EQ(s.input_ids, (std::vector<int64_t>{C, S, P, P, P, P, P, P}));
  EXPECT_EQ(s.attention_mask, (std::vector<int64_t>{1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.token_type_ids, std::vector<int64_t>(8, 0));
  EXPECT_EQ(s.label, 0);

  // "tab\there é" is 11 bytes: truncated to seq_length - 2 = 6, no padding left.
  d.sample_into(2, s);
  std::vector<int64_t> want{C};
  for (int64_t t : ids_of("tab\the")) want.push_back(t);
  want.push_back(S);
  EXPECT_EQ(s.input_ids, want);
  EXPECT_EQ(s.attention_mask, std::vector<int64_t>(8, 1));
  EXPECT_EQ(s.label, 3);

  MFT_EXPECT_ERROR(d.sample(3), "outside [0, 3)");
  MFT_EXPECT_ERROR(d.sample(-1), "outside");
}

TEST(ClassificationDataset, CountsLabelsAndTruncation) {
  mft::TempDir dir;
  std::string path = dir.file("a.jsonl");
  // Lengths 4, 5, 6, 7 bytes against seq_length 7 (5 text tokens): the last two are truncated.
  mft::write_text(path,
                  "{\"text\": \"abcd\", \"label\": 4}\n{\"text\": \"abcde\", \"label\": 0}\n"
                  "{\"text\": \"abcdef\", \"label\": 4}\n{\"text\": \"abcdefg\", \"label\": 2}\n");
  auto d = make(path, opts(7));
  EXPECT_EQ(d.num_labels(), 5);
  EXPECT_EQ(d.label_counts(), (std::vector<int64_t>{1, 0, 1, 0, 2}));
  EXPECT_EQ(d.truncated_examples(), 2);
  for (int64_t i = 0; i < 4; ++i) {
    mf::ClassificationSample s = d.sample(i);
    ASSERT_EQ(s.input_ids.size(), 7u);
    int64_t real = std::min<int64_t>(4 + i, 5) + 2;
    for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(s.attention_mask[k], k < real ? 1 : 0) << i << " " << k;
    EXPECT_EQ(s.input_ids[real - 1], TestTokenizer::kSep);
    EXPECT_EQ(s.input_ids[real - 2], 'a' + real - 3);  // the text's first tokens are kept
  }
  // Exactly seq_length - 2 tokens is not truncated; the smallest seq_length holds [CLS] [SEP].
  EXPECT_EQ(make(path, opts(9)).truncated_examples(), 0);
  auto tiny = make(path, opts(2));
  EXPECT_EQ(tiny.truncated_examples(), 4);
  EXPECT_EQ(tiny.sample(3).input_ids, (std::vector<int64_t>{TestTokenizer::kCls, TestTokenizer::kSep}));
}

TEST(ClassificationDataset, EvaluationWalksTheFileInOrder) {
  mft::TempDir dir;
  std::string path = numbered_file(dir, 10);
  auto d = make(path, opts(16, 0, 7));
  ASSERT_EQ(d.size(), 10);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(d.example_of(i), i);
    mf::ClassificationSample s = d.sample(i);
    EXPECT_EQ(s.input_ids[3], '0' + i);  // [CLS] e x <k>
    EXPECT_EQ(s.label, i % 3);
  }
}

TEST(ClassificationDataset, EpochsArePermutationsInTheirOwnSeededOrder) {
  mft::TempDir dir;
  const int n = 10;
  std::string path = numbered_file(dir, n);
  auto d = make(path, opts(16, 35, 1234));  // 3.5 epochs
  ASSERT_EQ(d.size(), 35);
  EXPECT_EQ(d.num_epochs(), 4);
  std::vector<std::vector<int64_t>> epochs(4);
  for (int64_t i = 0; i < d.size(); ++i) {
    int64_t k = d.example_of(i);
    epochs[static_cast<size_t>(i / n)].push_back(k);
    mf::ClassificationSample s = d.sample(i);  // the sample is the example's
    EXPECT_EQ(s.label, k % 3);
    EXPECT_EQ(s.input_ids[3], '0' + k);
  }
  std::vector<int64_t> identity(n);
  for (int k = 0; k < n; ++k) identity[static_cast<size_t>(k)] = k;
  for (int e = 0; e < 3; ++e) {  // full epochs: each example once
    std::vector<int64_t> sorted = epochs[static_cast<size_t>(e)];
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity) << "epoch " << e;
    EXPECT_NE(epochs[static_cast<size_t>(e)], identity) << "epoch " << e << " is not shuffled";
  }
  EXPECT_EQ(std::set<int64_t>(epochs[3].begin(), epochs[3].end()).size(), 5u);  // a partial epoch: no repeats
  EXPECT_NE(epochs[0], epochs[1]);  // each epoch its own order
  EXPECT_NE(epochs[1], epochs[2]);

  // The same seed gives the same samples (the epochs are a prefix-stable function of the seed);
  // another seed another order.
  auto same = make(path, opts(16, 35, 1234)), longer = make(path, opts(16, 50, 1234)), other = make(path, opts(16, 35, 99));
  bool differs = false;
  for (int64_t i = 0; i < 35; ++i) {
    EXPECT_EQ(same.example_of(i), d.example_of(i));
    EXPECT_EQ(longer.example_of(i), d.example_of(i));
    EXPECT_EQ(same.sample(i).input_ids, d.sample(i).input_ids);
    differs |= other.example_of(i) != d.example_of(i);
  }
  EXPECT_TRUE(differs);
  MFT_EXPECT_ERROR(d.sample(35), "outside [0, 35)");
}

TEST(ClassificationDataset, SamplesArePureAndThreadSafe) {
  mft::TempDir dir;
  std::string path = numbered_file(dir, 37);
  auto d = make(path, opts(12, 200, 5));
  std::vector<std::vector<int64_t>> serial;
  for (int64_t i = 0; i < d.size(); ++i) serial.push_back(d.sample(d.size() - 1 - i).input_ids);
  std::vector<std::vector<int64_t>> parallel(static_cast<size_t>(d.size()));
#pragma omp parallel for
  for (int64_t i = 0; i < d.size(); ++i) parallel[static_cast<size_t>(i)] = d.sample(i).input_ids;
  for (int64_t i = 0; i < d.size(); ++i) EXPECT_EQ(parallel[static_cast<size_t>(i)], serial[static_cast<size_t>(d.size() - 1 - i)]);
}

TEST(ClassificationDataset, CustomKeys) {
  mft::TempDir dir;
  std::string path = dir.file("a.jsonl");
  mft::write_text(path, "{\"sentence\": \"hi\", \"y\": 1, \"text\": 5}\n");
  mf::ClassificationOptions o = opts(6);
  o.text_key = "sentence";
  o.label_key = "y";
  auto d = make(path, o);
  EXPECT_EQ(d.sample(0).input_ids[1], 'h');
  EXPECT_EQ(d.sample(0).label, 1);
  MFT_EXPECT_ERROR(make(path, opts(6)), "a.jsonl:1", "'text' is a number, not a string");
}

TEST(ClassificationDataset, BadInputNamesFileAndLine) {
  mft::TempDir dir;
  std::string path = dir.file("bad.jsonl");
  const std::string good = "{\"text\": \"ok\", \"label\": 0}\n\n";  // the bad line is line 3
  struct Case {
    std::string line;
    std::vector<const char*> parts;
  };
  std::vector<Case> cases = {
      {"{\"text\": \"x\", \"label\": 1", {"bad.jsonl:3", "invalid JSON"}},
      {"[1, 2]", {"bad.jsonl:3", "expected a JSON object, got array"}},
      {"{\"label\": 1}", {"bad.jsonl:3", "no key 'text'"}},
      {"{\"text\": [\"x\"], \"label\": 1}", {"bad.jsonl:3", "'text' is a array, not a string"}},
      {"{\"text\": \"x\"}", {"bad.jsonl:3", "no key 'label'"}},
      {"{\"text\": \"x\", \"label\": \"1\"}", {"bad.jsonl:3", "must be an integer, got \"1\""}},
      {"{\"text\": \"x\", \"label\": 1.5}", {"bad.jsonl:3", "must be an integer, got 1.5"}},
      {"{\"text\": \"x\", \"label\": 1.0}", {"bad.jsonl:3", "must be an integer"}},
      {"{\"text\": \"x\", \"label\": true}", {"bad.jsonl:3", "must be an integer, got true"}},
      {"{\"text\": \"x\", \"label\": null}", {"bad.jsonl:3", "must be an integer, got null"}},
      {"{\"text\": \"x\", \"label\": -1}", {"bad.jsonl:3", "label must be >= 0, got -1"}},
      {"{\"text\": \"x\", \"label\": 18446744073709551615}", {"bad.jsonl:3", "too large"}},
      {"{\"text\": \"x\", \"label\": 1048576}", {"bad.jsonl:3", "too large"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    mft::write_text(path, good + c.line + "\n" + good);
    try {
      make(path, opts(8));
      ADD_FAILURE() << "expected mf::Error";
    } catch (const mf::Error& e) {
      for (const char* part : c.parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "message '" << e.what() << "' lacks '" << part << "'";
    }
  }

  mft::write_text(path, "\n  \n");
  MFT_EXPECT_ERROR(make(path, opts(8)), "bad.jsonl", "holds no example");
  mft::write_text(path, "");
  MFT_EXPECT_ERROR(make(path, opts(8)), "bad.jsonl", "holds no example");
  MFT_EXPECT_ERROR(make(dir.file("missing.jsonl"), opts(8)), "missing.jsonl", "cannot open");

  mft::write_text(path, good);
  MFT_EXPECT_ERROR(make(path, opts(1)), "seq_length must be at least 2");
  TestTokenizer tok;
  MFT_EXPECT_ERROR(mf::ClassificationDataset(path, tok, 260, 258, 259, opts(8)), "cls id 260 outside");
  MFT_EXPECT_ERROR(mf::ClassificationDataset(path, tok, 257, -1, 259, opts(8)), "sep id -1 outside");
}

// scripts/make_fortune_classification.sh: every line of both files is a JSON object with a
// non-empty text and a label in [0, 4); each class splits 4:1 (every 5th entry held out) and no
// valid text appears in train.
TEST(FortuneClassification, ScriptWritesAValidSplit) {
  if (!std::filesystem::exists("/usr/share/games/fortunes/computers"))
    GTEST_SKIP() << "the fortune databases are not installed (bash scripts/prepare_corpus.sh as root)";
  mft::TempDir dir;
  std::string out = dir.file("out");
  std::string cmd = "bash '" + std::string(MESHFLOW_SOURCE_DIR) + "/scripts/make_fortune_classification.sh' '" + out +
                    "' > '" + dir.file("log") + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << mft::slurp(dir.file("log"));
  std::string log = mft::slurp(dir.file("log"));
  EXPECT_NE(log.find("majority"), std::string::npos) << log;

  const std::vector<std::string> names = {"computers", "definitions", "politics", "songs-poems"};
  std::string labels = mft::slurp(out + "/labels.txt");
  EXPECT_EQ(labels, "computers\ndefinitions\npolitics\nsongs-poems\n");

  auto read = [&](const std::string& file, std::vector<int64_t>& counts, std::set<std::string>& texts) {
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in.is_open()) << file;
    std::string line;
    int64_t lineno = 0;
    counts.assign(names.size(), 0);
    while (std::getline(in, line)) {
      ++lineno;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        FAIL() << file << ":" << lineno << ": " << e.what() << "\n" << line;
      }
      ASSERT_TRUE(j.is_object() && j.contains("text") && j.contains("label")) << file << ":" << lineno;
      ASSERT_TRUE(j["text"].is_string() && j["label"].is_number_integer()) << file << ":" << lineno;
      const std::string& text = j["text"].get_ref<const std::string&>();
      EXPECT_FALSE(text.empty()) << file << ":" << lineno;
      EXPECT_TRUE(text.find_first_not_of(" \t\r\n") == 0 && text.find_last_not_of(" \t\r\n") == text.size() - 1)
          << file << ":" << lineno << ": not trimmed";
      int64_t y = j["label"].get<int64_t>();
      ASSERT_TRUE(y >= 0 && y < 4) << file << ":" << lineno;
      ++counts[static_cast<size_t>(y)];
      EXPECT_TRUE(texts.insert(text).second) << file << ":" << lineno << ": repeated text";
    }
  };
  std::vector<int64_t> train, valid;
  std::set<std::string> train_texts, valid_texts;
  read(out + "/train.jsonl", train, train_texts);
  read(out + "/valid.jsonl", valid, valid_texts);
  for (size_t c = 0; c < names.size(); ++c) {
    SCOPED_TRACE(names[c]);
    EXPECT_GT(valid[c], 100);                    // hundreds of entries per database
    EXPECT_EQ(valid[c], (train[c] + valid[c]) / 5);  // every 5th entry
  }
  for (const std::string& t : valid_texts) EXPECT_EQ(train_texts.count(t), 0u) << "valid text in train: " << t;

  // The dataset reads them: 4 labels, the counts above.
  TestTokenizer tok;
  mf::ClassificationDataset v(out + "/valid.jsonl", tok, TestTokenizer::kCls, TestTokenizer::kSep, TestTokenizer::kPad,
                              opts(64));
  EXPECT_EQ(v.num_labels(), 4);
  EXPECT_EQ(v.label_counts(), valid);
}

}  // namespace
