// preprocess(): jsonl and separator / blank-line / whole-file text inputs, eod handling,
// Megatron's output naming, and errors that leave no output behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data_testing.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/preprocess.h"
#include "testing.h"

namespace {

using mf::TextSplit;

TEST(Preprocess, SplitsTextDocuments) {
  using V = std::vector<std::string>;
  EXPECT_EQ(mf::split_text_documents("a\nb\n%\nc\n%\n%\nd", TextSplit::kSeparatorLine, "%"), (V{"a\nb\n", "c\n", "d"}));
  EXPECT_EQ(mf::split_text_documents("a\r\n%\r\nb %\n", TextSplit::kSeparatorLine, "%"), (V{"a\r\n", "b %\n"}));
  EXPECT_EQ(mf::split_text_documents("\n\na\nb\n\n \nc\n", TextSplit::kBlankLine, ""), (V{"a\nb\n", "c\n"}));
  EXPECT_EQ(mf::split_text_documents("x\n%\ny", TextSplit::kWholeFile, "%"), (V{"x\n%\ny"}));
}

TEST(Preprocess, FortuneStyleTextWithEod) {
  mft::TempDir dir;
  mft::write_text(dir.file("f1"), "First fortune.\n%\nSecond\nfortune.\n%\n");
  mft::write_text(dir.file("f2"), "Third \xe2\x80\x94 caf\xc3\xa9.\n%\n   \n%\n");
  mf::ByteTokenizer tok;
  mf::PreprocessResult r = mf::preprocess({dir.file("f1"), dir.file("f2")}, dir.file("out"), tok);
  EXPECT_EQ(r.prefix, dir.file("out") + "_text_document");
  EXPECT_TRUE(std::filesystem::exists(r.prefix + ".bin"));
  EXPECT_TRUE(std::filesystem::exists(r.prefix + ".idx"));
  EXPECT_EQ(r.documents, 3);  // the blank entry is skipped
  mf::IndexedDataset ds(r.prefix);
  EXPECT_EQ(ds.dtype(), mf::IndexDType::kU16);
  ASSERT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(r.tokens, ds.num_tokens());
  std::vector<std::string> want = {"First fortune.\n", "Second\nfortune.\n", "Third \xe2\x80\x94 caf\xc3\xa9.\n"};
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> s = ds.sequence(i);
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.back(), tok.eod_id());
    s.pop_back();
    EXPECT_EQ(tok.decode(s), want[i]);
  }
}

TEST(Preprocess, ShuffledDocumentOrderIsASeededPermutation) {
  mft::TempDir dir;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "document " + std::to_string(i) + "\n%\n";
  mft::write_text(dir.file("f"), text);
  mf::ByteTokenizer tok;
  mf::PreprocessOptions o;
  o.append_eod = false;
  o.shuffle_seed = 7;
  auto read_all = [&](const std::string& prefix) {
    mf::IndexedDataset ds(prefix);
    std::vector<std::string> docs;
    for (int64_t i = 0; i < ds.num_sequences(); ++i) docs.push_back(tok.decode(ds.sequence(i)));
    return docs;
  };
  auto a = read_all(mf::preprocess({dir.file("f")}, dir.file("a"), tok, o).prefix);
  auto b = read_all(mf::preprocess({dir.file("f")}, dir.file("b"), tok, o).prefix);
  o.shuffle_seed.reset();
  auto plain = read_all(mf::preprocess({dir.file("f")}, dir.file("c"), tok, o).prefix);
  EXPECT_EQ(a, b);      // seeded: the same order twice
  EXPECT_NE(a, plain);  // shuffled
  std::sort(a.begin(), a.end());
  std::sort(plain.begin(), plain.end());
  EXPECT_EQ(a, plain);  // a permutation of the same documents
}

TEST(Preprocess, JsonlWithGpt2AndCustomKey) {
  mft::TempDir dir;
  mft::write_text(dir.file("a.jsonl"),
                  "{\"content\": \"Hello world\", \"id\": 1}\n\n{\"content\": \"It's 2024!\\nOK\"}\n");
  mf::Gpt2BpeTokenizer tok = mf::Gpt2BpeTokenizer::from_directory(mft::gpt2_vocab_dir());
  mf::PreprocessOptions opt;
  opt.json_key = "content";
  opt.append_eod = false;
  mf::PreprocessResult r = mf::preprocess({dir.file("a.jsonl")}, dir.file("corpus"), tok, opt);
  EXPECT_EQ(r.prefix, dir.file("corpus") + "_content_document");
  mf::IndexedDataset ds(r.prefix);
  ASSERT_EQ(ds.num_documents(), 2);
  EXPECT_EQ(ds.sequence(0), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok.decode(ds.sequence(1)), "It's 2024!\nOK");
  EXPECT_EQ(ds.dtype(), mf::IndexDType::kU16);
}

// Megatron keeps a document of white space only (it tokenizes to ids); one that tokenizes to no
// id is left out and counted. Such documents were once dropped as blank.
TEST(Preprocess, WhitespaceOnlyDocumentIsKept) {
  mft::TempDir dir;
  mft::write_text(dir.file("w.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"   \"}\n{\"text\": \"\"}\n{\"text\": \"\\n\"}\n");
  mf::ByteTokenizer tok;
  const mf::PreprocessResult r = mf::preprocess({dir.file("w.jsonl")}, dir.file("out"), tok);
  EXPECT_EQ(r.documents, 3);
  EXPECT_EQ(r.dropped_empty, 1);  // "": no id, so no end-of-document token alone either
  mf::IndexedDataset ds(r.prefix);
  ASSERT_EQ(ds.num_documents(), 3);
  const std::vector<int32_t> eod{tok.eod_id()};
  auto text_of = [&](int64_t i) {
    std::vector<int32_t> s = ds.sequence(i);
    EXPECT_EQ(s.back(), tok.eod_id());
    s.pop_back();
    return tok.decode(s);
  };
  EXPECT_EQ(text_of(0), "a");
  EXPECT_EQ(text_of(1), "   ");
  EXPECT_EQ(text_of(2), "\n");
  // Sentences: a document of white space keeps its one sentence too.
  mf::PreprocessOptions o;
  o.split_sentences = true;
  const mf::PreprocessResult s = mf::preprocess({dir.file("w.jsonl")}, dir.file("sent"), tok, o);
  EXPECT_EQ(s.documents + s.dropped_empty, 4);
}

// A device or a pipe is refused before reading (/dev/zero once read without end).
TEST(Preprocess, AnInputThatIsNotARegularFileIsRefused) {
  mft::TempDir dir;
  mf::ByteTokenizer tok;
  MFT_EXPECT_ERROR(mf::preprocess({"/dev/null"}, dir.file("out"), tok),
                   "preprocess: /dev/null is not a regular file (a character device); give a file of text or jsonl");
  MFT_EXPECT_ERROR(mf::preprocess({dir.path().string()}, dir.file("out"), tok), "is not a regular file (a folder)");
}

TEST(Preprocess, BadInputThrowsAndLeavesNoOutput) {
  mft::TempDir dir;
  mf::ByteTokenizer tok;
  mft::write_text(dir.file("good.jsonl"), "{\"text\": \"fine\"}\n");
  mft::write_text(dir.file("badjson.jsonl"), "{\"text\": \"fine\"}\n{\"text\": oops}\n");
  mft::write_text(dir.file("nokey.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"body\": \"c\"}\n");
  mft::write_text(dir.file("notstr.jsonl"), "{\"text\": 5}\n");
  mft::write_text(dir.file("array.jsonl"), "[1]\n");
  auto run = [&](const std::string& name) { mf::preprocess({dir.file("good.jsonl"), dir.file(name)}, dir.file("out"), tok); };
  MFT_EXPECT_ERROR(run("badjson.jsonl"), "badjson.jsonl:2", "invalid JSON");
  MFT_EXPECT_ERROR(run("nokey.jsonl"), "nokey.jsonl:3", "no key 'text'");
  MFT_EXPECT_ERROR(run("notstr.jsonl"), "notstr.jsonl:1", "not a string");
  MFT_EXPECT_ERROR(run("array.jsonl"), "array.jsonl:1", "object");
  MFT_EXPECT_ERROR(run("missing.txt"), "missing.txt");
  MFT_EXPECT_ERROR(mf::preprocess({}, dir.file("out"), tok), "no input");
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find("out"), std::string::npos) << "left behind: " << e.path();
}

}  // namespace
