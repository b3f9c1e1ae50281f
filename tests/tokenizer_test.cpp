// Tokenizers: byte round trips, GPT-2 BPE ids against the reference JavaScript encoder
// (tests/fixtures/gpt2_bpe.json, from scripts/make_tokenizer_fixtures.sh), the pre-tokeniser's
// splits, Hugging Face-format files, and errors for bad vocabulary files; SentencePiece (Llama 2's
// tokenizer.model, fetched by scripts/fetch-tokenizers.sh) against llama-tokenizer-js
// (tests/fixtures/sentencepiece_llama2.json); the tokenizer factory and config keys. Hugging
// Face tokenizer.json: hf_bpe_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "data_testing.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/gpt2_pretokenize.h"
#include "meshflow/data/sentencepiece.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/train/components.h"
#include "testing.h"

namespace {

using mf::Gpt2BpeTokenizer;

const std::vector<std::string> kUnicodeTexts = {
    "Hello, world!",
    "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m e\u0301",
    "\u4f60\u597d\u4e16\u754c \u3053\u3093\u306b\u3061\u306f",
    "emoji \U0001F600\U0001F680 \U0001F468\u200D\U0001F469\u200D\U0001F467",
    "line one\nline two\r\n\n\nline three\n",
    "multiple     spaces\t\ttabs   ",
    "",
    " ",
    "\n",
};

const Gpt2BpeTokenizer& gpt2() {
  static const Gpt2BpeTokenizer tok = Gpt2BpeTokenizer::from_directory(mft::gpt2_vocab_dir());
  return tok;
}

nlohmann::json fixtures() {
  nlohmann::json j = nlohmann::json::parse(mft::slurp(mft::fixture_path("gpt2_bpe.json")));
  EXPECT_GE(j.size(), 20u);
  return j;
}

TEST(ByteTokenizer, RoundTripsUnicodeAndArbitraryBytes) {
  mf::ByteTokenizer tok;
  for (const std::string& s : kUnicodeTexts) {
    std::vector<int32_t> ids = tok.encode(s);
    EXPECT_EQ(ids.size(), s.size());
    EXPECT_EQ(tok.decode(ids), s);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.eod_id(), 256);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{104, 105, 256}), "hi<|endoftext|>");
  MFT_EXPECT_ERROR(tok.decode(std::vector<int32_t>{257}), "257");
}

TEST(Gpt2Pretokenize, SplitsLikeTheRegex) {
  std::vector<std::string_view> p;
  auto split = [&](std::string_view s) {
    mf::gpt2_pretokenize(s, p);
    return std::vector<std::string>(p.begin(), p.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(split("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("end   "), (V{"end", "   "}));
  EXPECT_EQ(split("it's they'll I'M"), (V{"it", "'s", " they", "'ll", " I", "'", "M"}));
  EXPECT_EQ(split("x1234 !?. 12ab"), (V{"x", "1234", " !?.", " 12", "ab"}));
  EXPECT_EQ(split("\u00e9t\u00e9 \u0661\u0662"), (V{"\u00e9t\u00e9", " \u0661\u0662"}));
  EXPECT_EQ(split("\u4f60\u597d\uff0c"), (V{"\u4f60\u597d", "\uff0c"}));
  EXPECT_EQ(split(" \n x"), (V{" \n", " x"}));
  // Invalid UTF-8 bytes are punctuation and stay covered.
  std::string bad = "ab\xff\xfe cd\xc3";
  std::string joined;
  for (auto& s : split(bad)) joined += s;
  EXPECT_EQ(joined, bad);
}

TEST(Gpt2BpeTokenizer, MatchesReferenceEncoderIds) {
  const auto& tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eod_id(), 50256);
  EXPECT_EQ(tok.num_merges(), 50000);
  for (const auto& f : fixtures()) {
    std::string text = f.at("text");
    std::vector<int32_t> want = f.at("ids");
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
    EXPECT_EQ(tok.encode(text), want) << "cached, text: " << text;
    EXPECT_EQ(tok.decode(want), text);
  }
}

TEST(Gpt2BpeTokenizer, RoundTripsUnicodeAndArbitraryBytes) {
  const auto& tok = gpt2();
  for (const std::string& s : kUnicodeTexts) EXPECT_EQ(tok.decode(tok.encode(s)), s) << s;
  std::string all;
  for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  EXPECT_EQ(tok.encode("Hello"), (std::vector<int32_t>{15496}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{50256}), "<|endoftext|>");
  MFT_EXPECT_ERROR(tok.decode(std::vector<int32_t>{50257}), "50257");
}

TEST(Gpt2BpeTokenizer, ConcurrentEncodesAgree) {
  const auto& tok = gpt2();
  auto fx = fixtures();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r)
        for (const auto& f : fx)
          if (tok.encode(f.at("text").get<std::string>()) != f.at("ids").get<std::vector<int32_t>>()) ++bad[t];
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

TEST(Gpt2BpeTokenizer, HuggingFaceFilesGiveTheSameIds) {
  mft::TempDir dir;
  const std::string src = mft::gpt2_vocab_dir();
  // vocab.json: same map, re-serialised (sorted keys); merges.txt: Hugging Face's header line.
  nlohmann::json vocab = nlohmann::json::parse(mft::slurp(src + "/encoder.json"));
  mft::write_text(dir.file("vocab.json"), vocab.dump());
  std::string merges = mft::slurp(src + "/vocab.bpe");
  merges = "#version: 0.2 - Trained by `huggingface/tokenizers`\n" + merges.substr(merges.find('\n') + 1);
  mft::write_text(dir.file("merges.txt"), merges);
  Gpt2BpeTokenizer hf = Gpt2BpeTokenizer::from_directory(dir.path().string());
  EXPECT_EQ(hf.num_merges(), 50000);
  for (const auto& f : fixtures()) EXPECT_EQ(hf.encode(f.at("text").get<std::string>()), f.at("ids").get<std::vector<int32_t>>());
  auto via_factory = mf::make_tokenizer("gpt2", dir.path().string());
  EXPECT_EQ(via_factory->encode("Hello"), (std::vector<int32_t>{15496}));
}

TEST(Gpt2BpeTokenizer, BadFilesThrowNamingTheFile) {
  mft::TempDir dir;
  const std::string src = mft::gpt2_vocab_dir();
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(dir.file("missing.json"), src + "/vocab.bpe"), "missing.json");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(src + "/encoder.json", dir.file("missing.bpe")), "missing.bpe");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer::from_directory(dir.path().string()), "neither");
  mft::write_text(dir.file("corrupt.json"), "{\"a\": 0, \"b\": ");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(dir.file("corrupt.json"), src + "/vocab.bpe"), "corrupt.json", "JSON");
  mft::write_text(dir.file("array.json"), "[1, 2]");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(dir.file("array.json"), src + "/vocab.bpe"), "array.json");
  mft::write_text(dir.file("gap.json"), "{\"a\": 0, \"b\": 5}");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(dir.file("gap.json"), src + "/vocab.bpe"), "gap.json", "out of range");
  std::string merges = mft::slurp(src + "/vocab.bpe");
  mft::write_text(dir.file("bad.bpe"), merges.substr(0, 200) + "\nthree tokens here\n");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(src + "/encoder.json", dir.file("bad.bpe")), "bad.bpe", "two tokens");
  mft::write_text(dir.file("unknown.bpe"), "#version: 0.2\nzzzz qqqq\n");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(src + "/encoder.json", dir.file("unknown.bpe")), "unknown.bpe:2");
  MFT_EXPECT_ERROR(mf::make_tokenizer("sentencepiece"), "sentencepiece");
}

const mf::SentencePieceTokenizer& llama2() {
  static const mf::SentencePieceTokenizer tok =
      mf::SentencePieceTokenizer::from_file(mft::tokenizer_data_file("llama2/tokenizer.model"));
  return tok;
}

TEST(SentencePieceTokenizer, Llama2MatchesReferenceEncoderIds) {
  const auto& tok = llama2();
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.eod_id(), 2);  // </s>
  EXPECT_EQ(tok.bos_id(), 1);
  nlohmann::json fx = nlohmann::json::parse(mft::slurp(mft::fixture_path("sentencepiece_llama2.json")));
  EXPECT_GE(fx.at("cases").size(), 40u);
  for (const auto& c : fx.at("cases")) {
    std::string text = c.at("text");
    std::vector<int32_t> want = c.at("ids");
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
    EXPECT_EQ(tok.decode(want), text);
  }
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (const auto& c : fx.at("cases"))
        if (tok.encode(c.at("text").get<std::string>()) != c.at("ids").get<std::vector<int32_t>>()) ++bad[t];
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

TEST(SentencePieceTokenizer, ControlPiecesRoundTripsAndErrors) {
  const auto& tok = llama2();
  using V = std::vector<int32_t>;
  EXPECT_EQ(tok.encode("Hello"), (V{15043}));  // "▁Hello": the dummy prefix, no <s>
  EXPECT_EQ(tok.decode(V{1, 15043, 2, 15043, 2}), "<s>Hello</s>Hello</s>");
  EXPECT_EQ(tok.piece_id("</s>"), 2);
  EXPECT_EQ(tok.piece_id("<unk>"), 0);
  EXPECT_EQ(tok.piece_id("no such piece"), -1);
  for (const std::string& s : kUnicodeTexts) EXPECT_EQ(tok.decode(tok.encode(s)), s) << s;
  MFT_EXPECT_ERROR(tok.decode(V{32000}), "32000");
  const std::string path = mft::tokenizer_data_file("llama2/tokenizer.model");
  EXPECT_EQ(mf::SentencePieceTokenizer::from_file(path, "<s>").eod_id(), 1);
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(path, "<|eot|>"), "tokenizer.model", "<|eot|>");
  mft::TempDir dir;
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(dir.file("none.model")), "none.model", "no such file");
  mft::write_text(dir.file("junk.model"), "this is not a protobuf\n");
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(dir.file("junk.model")), "junk.model", "cannot load");
}

TEST(MakeTokenizer, KindsFilesAndFolders) {
  auto spm = mf::make_tokenizer("sentencepiece", mft::tokenizer_data_file("llama2"));
  EXPECT_EQ(spm->name(), "sentencepiece");
  EXPECT_EQ(spm->encode("Hello"), (std::vector<int32_t>{15043}));
  mft::TempDir dir;
  MFT_EXPECT_ERROR(mf::make_tokenizer("hf_bpe", dir.path().string()), dir.path().c_str(), "no tokenizer.json");
  MFT_EXPECT_ERROR(mf::make_tokenizer("sentencepiece", dir.path().string()), "no tokenizer.model");
  MFT_EXPECT_ERROR(mf::make_tokenizer("hf_bpe"), "hf_bpe", "tokenizer.json");
  MFT_EXPECT_ERROR(mf::make_tokenizer("unigram"), "unigram", "byte, gpt2_bpe, hf_bpe, sentencepiece, wordpiece");
  MFT_EXPECT_ERROR(mf::make_tokenizer("wordpiece"), "wordpiece", "vocab.txt");
  // The tokenization.* keys choose them (as `meshflow preprocess` and training do).
  using mf::train::tokenizer_registry;
  mf::Config c;
  MFT_EXPECT_ERROR(tokenizer_registry().create("hf_bpe", c), "needs tokenization.tokenizer_file");
  c.set("tokenization.tokenizer_file", mft::tokenizer_data_file("llama2/tokenizer.model"), "test");
  c.set("tokenization.eod_token", "<s>", "test");
  auto from_config = tokenizer_registry().create("sentencepiece", c);
  EXPECT_EQ(from_config->vocab_size(), 32000);
  EXPECT_EQ(from_config->eod_id(), 1);
}

}  // namespace
