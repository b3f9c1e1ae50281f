// Tokenizers: byte round trips, GPT-2 BPE ids against the reference JavaScript encoder
// (tests/fixtures/gpt2_bpe.json, from scripts/make_tokenizer_fixtures.sh), the pre-tokeniser's
// splits, Hugging Face-format files, and errors for bad vocabulary files; SentencePiece (Llama 2's
// tokenizer.model, fetched by scripts/fetch-tokenizers.sh) against llama-tokenizer-js
// (tests/fixtures/sentencepiece_llama2.json); SentencePiece models trained here with Debian's
// spm_train on tests/fixtures/multilingual.txt against spm_encode's ids, T5's <extra_id_k>
// sentinels against Hugging Face's id formula, and the tiny T5 tokenizer of
// scripts/make_t5_tokenizer.sh; the tokenizer factory and config keys; BPE merges (MergeTable)
// against a quadratic reference on adversarial words, and the piece cache's bound. Hugging Face
// tokenizer.json: hf_bpe_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "data_testing.h"
#include "meshflow/core/regular_file.h"
#include "meshflow/data/byte_level_bpe.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/gpt2_pretokenize.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/sentencepiece.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/data/wordpiece.h"
#include "meshflow/runtime/components.h"
#include "testing.h"
#include "whitespace_fixture.h"

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
  // \s is Unicode White_Space, as in the Python `regex` package OpenAI's encoder uses (these are
  // its splits): U+0085 is white space; U+FEFF and U+001C (white space for str.isspace) are not.
  EXPECT_EQ(split("x \u0085y x\x1cy x \ufeffy"), (V{"x", " ", "\u0085", "y", " x", "\x1c", "y", " x", " \ufeff", "y"}));
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

// Unicode White_Space, code point by code point over all of Unicode.
TEST(Unicode, IsSpaceIsExactlyWhiteSpace) {
  const auto& ws = mft::white_space_code_points();
  EXPECT_EQ(ws.size(), 25u);
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp)
    if (mf::unicode::is_space(cp) != (ws.count(cp) > 0)) ADD_FAILURE() << "is_space(U+" << std::hex << static_cast<unsigned>(cp) << ")";
  EXPECT_FALSE(mf::unicode::is_space(mf::unicode::kInvalid));
}

// Every White_Space code point (and U+FEFF, U+200B, U+180E, U+001C-001F) in context, against the
// ids of OpenAI's encoder: gpt-3-encoder's, with U+0085 and U+FEFF split as the `regex` package's
// \s (White_Space) does (tests/fixtures/unicode_whitespace.json, each case's "ref").
TEST(Gpt2BpeTokenizer, WhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("gpt2", [](const std::string& t) { return gpt2().encode(t); });
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

// BPE merges, written here the straightforward quadratic way: the reference MergeTable::apply
// must agree with. A table is (left, right, merged) triples in rank order; a repeated pair keeps
// its first rank.
using MergeList = std::vector<std::array<int32_t, 3>>;

// The standard algorithm: the adjacent pair of lowest rank, its leftmost occurrence, one at a time.
std::vector<int32_t> reference_merge(const MergeList& table, std::vector<int32_t> word) {
  std::map<std::pair<int32_t, int32_t>, std::pair<size_t, int32_t>> rank;
  for (size_t r = 0; r < table.size(); ++r) rank.emplace(std::pair{table[r][0], table[r][1]}, std::pair{r, table[r][2]});
  for (;;) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = rank.find({word[i], word[i + 1]});
      if (it != rank.end() && it->second.first < best) {
        best = it->second.first;
        at = i;
      }
    }
    if (best == SIZE_MAX) return word;
    word[at] = rank.at({word[at], word[at + 1]}).second;
    word.erase(word.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

// GPT-2's: the pair of lowest rank, all its non-overlapping occurrences left to right at once.
std::vector<int32_t> gpt2_style_merge(const MergeList& table, std::vector<int32_t> word) {
  std::map<std::pair<int32_t, int32_t>, std::pair<size_t, int32_t>> rank;
  for (size_t r = 0; r < table.size(); ++r) rank.emplace(std::pair{table[r][0], table[r][1]}, std::pair{r, table[r][2]});
  for (;;) {
    size_t best = SIZE_MAX;
    std::pair<int32_t, int32_t> pair;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = rank.find({word[i], word[i + 1]});
      if (it != rank.end() && it->second.first < best) {
        best = it->second.first;
        pair = it->first;
      }
    }
    if (best == SIZE_MAX) return word;
    std::vector<int32_t> out;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && std::pair{word[i], word[i + 1]} == pair) {
        out.push_back(rank.at(pair).second);
        i += 2;
      } else {
        out.push_back(word[i++]);
      }
    }
    word = out;
  }
}

std::vector<int32_t> table_merge(const MergeList& table, std::vector<int32_t> word) {
  mf::bpe::MergeTable t;
  for (const auto& m : table) t.add(m[0], m[1], m[2]);
  t.apply(word);
  return word;
}

// A table trained on `corpus` the usual way (each merge's parts are symbols or earlier merges):
// the most frequent adjacent pair, ties to the smallest pair, `merges` times; ids from `first_id`.
MergeList train_table(std::vector<std::vector<int32_t>> corpus, int merges, int32_t first_id) {
  MergeList table;
  for (int k = 0; k < merges; ++k) {
    std::map<std::pair<int32_t, int32_t>, int> count;
    for (const auto& w : corpus)
      for (size_t i = 0; i + 1 < w.size(); ++i) ++count[{w[i], w[i + 1]}];
    if (count.empty()) break;
    auto best = std::max_element(count.begin(), count.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    const int32_t id = first_id + k;
    table.push_back({best->first.first, best->first.second, id});
    for (auto& w : corpus) w = gpt2_style_merge({table.back()}, w);
  }
  return table;
}

std::vector<int32_t> repeat(std::vector<int32_t> unit, size_t n) {
  std::vector<int32_t> w;
  while (w.size() < n) w.insert(w.end(), unit.begin(), unit.end());
  w.resize(n);
  return w;
}

// Adversarial words: runs of one symbol (where leftmost-first decides "aaa" -> "aa a"), two- and
// three-symbol alternations, runs broken by one odd symbol, and random words over 3 symbols.
std::vector<std::vector<int32_t>> adversarial_words() {
  std::vector<std::vector<int32_t>> words;
  for (size_t n = 0; n <= 70; ++n) {
    words.push_back(repeat({0}, n));
    words.push_back(repeat({0, 1}, n));
    words.push_back(repeat({1, 0, 0}, n));
    words.push_back(repeat({0, 1, 2}, n));
    std::vector<int32_t> broken = repeat({0}, n);
    if (n > 2) broken[n / 2] = 2;
    words.push_back(broken);
  }
  std::mt19937 rng(7);
  for (int k = 0; k < 300; ++k) {
    std::vector<int32_t> w(rng() % 60);
    for (auto& s : w) s = static_cast<int32_t>(rng() % 3);
    words.push_back(w);
  }
  return words;
}

TEST(MergeTable, MatchesTheQuadraticReferenceOnAdversarialWords) {
  const auto words = adversarial_words();
  // Tables trained on repeats and on random text: the reference, GPT-2's all-at-once way and the
  // table agree on every word.
  std::vector<MergeList> trained = {train_table({repeat({0}, 64)}, 6, 3), train_table({repeat({0, 1}, 64)}, 6, 3),
                                    train_table({repeat({1, 0, 0}, 60), repeat({0, 1, 2}, 60)}, 12, 3),
                                    train_table(std::vector<std::vector<int32_t>>(words.end() - 50, words.end()), 40, 3)};
  for (const MergeList& table : trained) {
    ASSERT_GE(table.size(), 6u);
    for (const auto& w : words) {
      const auto want = reference_merge(table, w);
      EXPECT_EQ(gpt2_style_merge(table, w), want);
      EXPECT_EQ(table_merge(table, w), want) << "word of " << w.size() << " symbols";
    }
  }
  // Arbitrary tables (a merge may make a pair ranked below the one being merged, or repeat a pair;
  // Llama 2's tokenizer.json has such merges): the table agrees with the reference.
  std::mt19937 rng(11);
  for (int t = 0; t < 40; ++t) {
    MergeList table;
    for (int k = 0; k < 24; ++k)
      table.push_back({static_cast<int32_t>(rng() % 8), static_cast<int32_t>(rng() % 8), static_cast<int32_t>(rng() % 8)});
    for (const auto& w : words) ASSERT_EQ(table_merge(table, w), reference_merge(table, w)) << "table " << t;
  }
}

TEST(MergeTable, MergesTheLeftmostOccurrenceBeforeALowerRankedPairItMakes) {
  // a = 0, b = 1, ab = 2, aba = 3; "aba" ranks before "ab": in "abab" the first "ab" becomes
  // "aba" with the next "a", leaving "b" (Hugging Face's tokenizers give aba + b, not ab + ab).
  const MergeList table = {{2, 0, 3}, {0, 1, 2}};
  EXPECT_EQ(table_merge(table, {0, 1, 0, 1}), (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(table_merge(table, {0, 1, 0, 1}), reference_merge(table, {0, 1, 0, 1}));
  // "aaa" with a + a -> aa: the leftmost pair merges.
  EXPECT_EQ(table_merge({{0, 0, 4}}, {0, 0, 0}), (std::vector<int32_t>{4, 0}));
  // A million-symbol word merges (all the way to 2^k runs).
  MergeList powers;
  for (int32_t k = 0; k < 20; ++k) powers.push_back({10 + k, 10 + k, 11 + k});
  std::vector<int32_t> big = table_merge(powers, repeat({10}, (size_t{1} << 20) + 3));
  EXPECT_EQ(big, (std::vector<int32_t>{30, 11, 10}));
}

TEST(PieceCache, KeepsShortPiecesOnly) {
  mf::bpe::PieceCache cache;
  const std::string piece(256, 'a'), longer = piece + "a";  // 256: PieceCache::kMaxPieceBytes
  cache.store(piece, {1, 2});
  cache.store(longer, {3});
  std::vector<int32_t> out;
  EXPECT_TRUE(cache.append(piece, out));
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(cache.append(longer, out));  // a long unbroken word is not kept
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

// Llama 2's tokenizer.model on every White_Space code point in context, against llama-tokenizer-js.
TEST(SentencePieceTokenizer, Llama2WhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("llama2", [](const std::string& t) { return llama2().encode(t); });
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

// Tokenizer files must be regular files of sane size: a device (/dev/zero would be read without
// end), a FIFO (opening it would wait for a writer) or a folder is refused at once, in one line
// naming the config key or the file's role, and the path.
TEST(TokenizerFiles, OnlyRegularFilesOfBoundedSizeAreRead) {
  mft::TempDir dir;
  const std::string fifo = dir.file("fifo"), none = dir.file("none"), big = dir.file("big"), ok = dir.file("ok");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string fifo_what = "what '" + fifo + "' is a FIFO", none_what = "what '" + none + "': no such file";
  MFT_EXPECT_ERROR(mf::read_regular_file("/dev/zero", "tokenization.vocab_file", mf::kMaxTokenizerFileBytes),
                   "tokenization.vocab_file '/dev/zero' is a character device, not a regular file");
  MFT_EXPECT_ERROR(mf::read_regular_file(fifo, "what", 100), fifo_what.c_str());
  MFT_EXPECT_ERROR(mf::check_regular_file(fifo, "what", 100), fifo_what.c_str());
  MFT_EXPECT_ERROR(mf::read_regular_file(dir.path().string(), "what", 100), "is a folder");
  MFT_EXPECT_ERROR(mf::read_regular_file(none, "what", 100), none_what.c_str());
  MFT_EXPECT_ERROR(mf::check_regular_file(none, "what", 100), none_what.c_str());
  mft::write_text(big, std::string(101, 'a'));
  MFT_EXPECT_ERROR(mf::read_regular_file(big, "what", 100), "is 101 bytes, more than the 100");
  MFT_EXPECT_ERROR(mf::check_regular_file(big, "what", 100), "is 101 bytes, more than the 100");
  mft::write_text(ok, std::string(100, 'b'));
  EXPECT_EQ(mf::read_regular_file(ok, "what", 100), std::string(100, 'b'));
  mf::check_regular_file(ok, "what", 100);
  mft::write_text(ok, "");
  EXPECT_EQ(mf::read_regular_file(ok, "what", 100), "");

  // Each loader.
  const std::string src = mft::gpt2_vocab_dir();
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer("/dev/zero", src + "/vocab.bpe"), "GPT-2 vocabulary '/dev/zero' is a character device");
  MFT_EXPECT_ERROR(Gpt2BpeTokenizer(src + "/encoder.json", fifo), "GPT-2 merges '", "is a FIFO");
  MFT_EXPECT_ERROR(mf::HfBpeTokenizer::from_file("/dev/zero"), "tokenizer.json '/dev/zero' is a character device");
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file("/dev/zero"), "SentencePiece model '/dev/zero' is a character device");
  MFT_EXPECT_ERROR(mf::WordPieceTokenizer::from_file(fifo), "WordPiece vocabulary '", "is a FIFO");

  // Through the config keys, named in the message.
  using mf::runtime::tokenizer_registry;
  mf::Config c;
  c.set("tokenization.vocab_file", "/dev/zero");
  c.set("tokenization.merges_file", src + "/vocab.bpe");
  MFT_EXPECT_ERROR(tokenizer_registry().create("gpt2_bpe", c), "tokenization.vocab_file '/dev/zero' is a character device");
  c.set("tokenization.vocab_file", src + "/encoder.json");
  c.set("tokenization.merges_file", fifo);
  const std::string merges_fifo = "tokenization.merges_file '" + fifo + "' is a FIFO";
  MFT_EXPECT_ERROR(tokenizer_registry().create("gpt2_bpe", c), merges_fifo.c_str());
  c.set("tokenization.tokenizer_file", "/dev/zero");
  for (const char* kind : {"hf_bpe", "sentencepiece", "wordpiece"})
    MFT_EXPECT_ERROR(tokenizer_registry().create(kind, c), "tokenization.tokenizer_file '/dev/zero' is a character device");
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
  using mf::runtime::tokenizer_registry;
  mf::Config c;
  MFT_EXPECT_ERROR(tokenizer_registry().create("hf_bpe", c), "needs tokenization.tokenizer_file");
  c.set("tokenization.tokenizer_file", mft::tokenizer_data_file("llama2/tokenizer.model"), "test");
  c.set("tokenization.eod_token", "<s>", "test");
  auto from_config = tokenizer_registry().create("sentencepiece", c);
  EXPECT_EQ(from_config->vocab_size(), 32000);
  EXPECT_EQ(from_config->eod_id(), 1);
}


// --- SentencePiece models trained here, against Debian's command-line tools -----------------

// Debian's SentencePiece tools (package `sentencepiece`; scripts/install-deps.sh installs it):
// the independent trainer and encoder of these tests. Throws, failing the test, when missing.
void require_spm_tools() {
  for (const char* tool : {"spm_train", "spm_encode", "spm_decode", "spm_export_vocab"})
    if (std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) != 0)
      throw mf::Error(std::string(tool) +
                      " is missing: install Debian's sentencepiece package (bash scripts/install-deps.sh does)");
}

// Runs `cmd` with /bin/sh; throws with the command and its output when it fails.
void run_shell(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw mf::Error("cannot run `" + cmd + "`");
  std::string output;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) throw mf::Error("`" + cmd + "` failed (status " + std::to_string(status) + "): " + output);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw mf::Error("cannot read " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  mft::write_text(path, text);
}

// Trains `dir`/`name`.model with spm_train on `input` (one sentence per line).
std::string train_spm(const mft::TempDir& dir, const std::string& name, const std::string& options,
                      const std::string& input = mft::fixture_path("multilingual.txt")) {
  require_spm_tools();
  run_shell("cd '" + dir.path().string() + "' && spm_train --input='" + input + "' --model_prefix=" + name + " " +
            options + " --num_threads=1 --minloglevel=2");
  return dir.file(name + ".model");
}

// spm_encode --output_format=id of each line of `input` (written to `ids_file`).
std::vector<std::vector<int32_t>> spm_encode_ids(const std::string& model, const std::string& input,
                                                 const std::string& ids_file) {
  run_shell("spm_encode --model='" + model + "' --output_format=id < '" + input + "' > '" + ids_file + "'");
  std::vector<std::vector<int32_t>> out;
  for (const std::string& line : read_lines(ids_file)) {
    std::istringstream is(line);
    std::vector<int32_t> ids;
    for (int32_t id; is >> id;) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

// The model's piece count, from spm_export_vocab (one piece per line).
int64_t spm_piece_count(const std::string& model, const std::string& vocab_file) {
  run_shell("spm_export_vocab --model='" + model + "' > '" + vocab_file + "'");
  return static_cast<int64_t>(read_lines(vocab_file).size());
}

// T5's conventions (scripts/make_t5_tokenizer.sh), small enough for the fixture's few lines.
const char* kT5Options =
    "--model_type=unigram --vocab_size=600 --hard_vocab_limit=false --character_coverage=1.0 "
    "--pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1";

TEST(SentencePieceTokenizer, MatchesSpmEncodeOnMultilingualText) {
  const std::string text_file = mft::fixture_path("multilingual.txt");
  const auto lines = read_lines(text_file);
  ASSERT_GE(lines.size(), 40u);
  mft::TempDir dir;
  struct Model {
    std::string name, options;
  };
  // A T5-style unigram model; a unigram model that leaves rare characters unknown; BPE with byte
  // fallback (the rare characters become <0xNN> pieces).
  const std::vector<Model> models = {
      {"t5", kT5Options},
      {"unigram_unk", "--model_type=unigram --vocab_size=400 --hard_vocab_limit=false --character_coverage=0.98"},
      {"bpe_bytes", "--model_type=bpe --vocab_size=700 --character_coverage=0.98 --byte_fallback=true"}};
  for (const Model& m : models) {
    SCOPED_TRACE(m.name);
    const std::string model = train_spm(dir, m.name, m.options);
    const auto want = spm_encode_ids(model, text_file, dir.file(m.name + ".ids"));
    run_shell("spm_decode --model='" + model + "' --input_format=id < '" + dir.file(m.name + ".ids") + "' > '" +
              dir.file(m.name + ".decoded") + "'");
    const auto decoded = read_lines(dir.file(m.name + ".decoded"));
    ASSERT_EQ(want.size(), lines.size());
    ASSERT_EQ(decoded.size(), lines.size());
    // Sentinels (none in these lines) change no id.
    for (int64_t extra_ids : {0, 100}) {
      const auto tok = mf::SentencePieceTokenizer::from_file(model, "", extra_ids);
      int64_t total = 0, unknown = 0, bytes = 0;
      for (size_t i = 0; i < lines.size(); ++i) {
        EXPECT_EQ(tok.encode(lines[i]), want[i]) << "line " << i + 1 << " of multilingual.txt: " << lines[i];
        EXPECT_EQ(tok.decode(want[i]), decoded[i]) << "line " << i + 1;
        for (int32_t id : want[i]) {
          const std::string piece = tok.id_to_token(id);
          unknown += piece == "<unk>";
          bytes += piece.size() == 6 && piece.rfind("<0x", 0) == 0;
        }
        total += static_cast<int64_t>(want[i].size());
      }
      EXPECT_GT(total, 500);
      if (m.name == "unigram_unk") {
        EXPECT_GT(unknown, 0) << "the model should leave some characters unknown";
      } else if (m.name == "bpe_bytes") {
        EXPECT_GT(bytes, 0) << "the model should fall back to bytes";
      } else {
        EXPECT_EQ(unknown, 0);
      }
    }
  }
}

TEST(SentencePieceTokenizer, T5SentinelsFollowHuggingFaceIds) {
  mft::TempDir dir;
  const std::string model = train_spm(dir, "t5", kT5Options);
  const int64_t pieces = spm_piece_count(model, dir.file("t5.vocab.txt"));
  using V = std::vector<int32_t>;
  // Hugging Face's T5Tokenizer: <extra_id_k> is vocab_size - 1 - k, vocab_size = pieces + extra_ids.
  auto hf_id = [&](int64_t k) { return static_cast<int32_t>(pieces + 100 - 1 - k); };
  const auto tok = mf::SentencePieceTokenizer::from_file(model, "", 100);
  EXPECT_EQ(tok.piece_size(), pieces);
  EXPECT_EQ(tok.vocab_size(), pieces + 100);
  EXPECT_EQ(tok.extra_ids(), 100);
  EXPECT_EQ(tok.eod_id(), 1);  // </s>, not a sentinel
  EXPECT_EQ(tok.token_to_id("<pad>"), 0);
  EXPECT_EQ(tok.token_to_id("<unk>"), 2);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.encode("<extra_id_0>"), V{hf_id(0)});
  EXPECT_EQ(hf_id(0), tok.vocab_size() - 1);  // <extra_id_0> is the last id
  EXPECT_EQ(tok.encode("<extra_id_99>"), V{static_cast<int32_t>(pieces)});
  for (int64_t k = 0; k < 100; ++k) {
    const std::string s = "<extra_id_" + std::to_string(k) + ">";
    EXPECT_EQ(tok.token_to_id(s), hf_id(k)) << s;
    EXPECT_EQ(tok.id_to_token(hf_id(k)), s);
    EXPECT_EQ(tok.sentinel_id(k), hf_id(k));
    EXPECT_EQ(tok.decode(V{hf_id(k)}), s);
  }
  for (const char* not_sentinel : {"<extra_id_100>", "<extra_id_07>", "<extra_id_-1>", "<extra_id_>", "extra_id_0",
                                   "<Extra_id_0>", "<extra_id_0> "})
    EXPECT_EQ(tok.token_to_id(not_sentinel), std::nullopt) << not_sentinel;

  // Texts mixing sentinels and text; a part is a sentinel when it is one of the 100 spellings.
  // Expected ids: the HF formula for the sentinels, spm_encode of each stretch of text between.
  const std::vector<std::vector<std::string>> texts = {
      {"Der schnelle ", "<extra_id_0>", " Fuchs", "<extra_id_1>", "springt über ", "<extra_id_99>"},
      {"<extra_id_5>", "世界", "<extra_id_42>", " мир 😀 ", "<extra_id_42>"},
      {"<extra_id_", "<extra_id_2>", ">"},
      {"<extra_id_100>, <extra_id_07>, <Extra_id_1> and <extra_id_-3> stay text ", "<extra_id_3>", "<extra_id_3>"},
      {"\ttabs and  spaces ", "<extra_id_10>", "  ", "<extra_id_11>", "x"},
      {"Καλημέρα<extra_id_", "<extra_id_9>", "9>"},
  };
  auto sentinel_index = [](const std::string& part) -> int64_t {
    for (int64_t k = 0; k < 100; ++k)
      if (part == "<extra_id_" + std::to_string(k) + ">") return k;
    return -1;
  };
  std::vector<std::string> stretches;
  for (const auto& parts : texts)
    for (const auto& part : parts)
      if (sentinel_index(part) < 0) stretches.push_back(part);
  write_lines(dir.file("stretches.txt"), stretches);
  const auto stretch_ids = spm_encode_ids(model, dir.file("stretches.txt"), dir.file("stretches.ids"));
  ASSERT_EQ(stretch_ids.size(), stretches.size());
  size_t next = 0;
  for (const auto& parts : texts) {
    std::string text;
    V want;
    for (const auto& part : parts) {
      text += part;
      if (int64_t k = sentinel_index(part); k >= 0) {
        want.push_back(hf_id(k));
      } else {
        const auto& ids = stretch_ids[next++];
        want.insert(want.end(), ids.begin(), ids.end());
      }
    }
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
  }
  // Without extra_ids the spellings are text.
  const auto plain = mf::SentencePieceTokenizer::from_file(model);
  EXPECT_EQ(plain.vocab_size(), pieces);
  EXPECT_EQ(plain.token_to_id("<extra_id_0>"), std::nullopt);
  write_lines(dir.file("plain.txt"), {"a <extra_id_0> b"});
  EXPECT_EQ(plain.encode("a <extra_id_0> b"), spm_encode_ids(model, dir.file("plain.txt"), dir.file("plain.ids"))[0]);

  // decode writes a sentinel as its text and decodes the runs between with SentencePiece (each
  // run without its dummy-prefix space, so the spaces next to a sentinel are not restored).
  for (const std::string s : {"<extra_id_0>Hello<extra_id_1>world<extra_id_99>", "世界<extra_id_3>мир",
                              "<extra_id_0><extra_id_0>", "Der<extra_id_5>Fuchs."})
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  EXPECT_EQ(tok.decode(tok.encode("Hello <extra_id_0> world")), "Hello<extra_id_0>world");
  EXPECT_EQ(tok.decode(V{hf_id(0), hf_id(99), 1}), "<extra_id_0><extra_id_99></s>");
  const std::string past_end = std::to_string(pieces + 100);
  MFT_EXPECT_ERROR(tok.decode(V{static_cast<int32_t>(pieces + 100)}), past_end.c_str(), "outside");
  MFT_EXPECT_ERROR(tok.id_to_token(static_cast<int32_t>(pieces + 100)), "outside");
  MFT_EXPECT_ERROR(tok.sentinel_id(100), "<extra_id_100>", "extra_ids is 100");

  // Thread-safe like the rest.
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  const std::string mixed = "Der schnelle <extra_id_0> Fuchs<extra_id_1>springt über <extra_id_99>";
  const V mixed_ids = tok.encode(mixed);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) bad[t] += tok.encode(mixed) != mixed_ids;
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);

  // End of document: a sentinel may be named; errors name the file and the key.
  EXPECT_EQ(mf::SentencePieceTokenizer::from_file(model, "<extra_id_0>", 100).eod_id(), hf_id(0));
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(model, "<extra_id_0>"), "t5.model", "<extra_id_0>",
                   "not a piece");
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(model, "", -1), "t5.model", "extra_ids", "-1");
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(model, "", 2147483647), "t5.model", "larger than int32");
  const std::string own = train_spm(dir, "own", std::string(kT5Options) + " '--user_defined_symbols=<extra_id_0>'");
  EXPECT_EQ(mf::SentencePieceTokenizer::from_file(own).token_to_id("<extra_id_0>"), 3);
  MFT_EXPECT_ERROR(mf::SentencePieceTokenizer::from_file(own, "", 100), "own.model",
                   "already has the piece <extra_id_0>");
}

TEST(SentencePieceTokenizer, T5FoldersFactoryAndConfig) {
  mft::TempDir dir;
  const std::string model = train_spm(dir, "t5", kT5Options);
  const int64_t pieces = mf::SentencePieceTokenizer::from_file(model).vocab_size();
  // A folder holding spiece.model (T5's name); tokenizer.model wins when both are there.
  std::filesystem::create_directory(dir.path() / "t5");
  std::filesystem::copy_file(model, dir.path() / "t5" / "spiece.model");
  auto t5 = mf::make_tokenizer("sentencepiece", dir.file("t5"), "", true, 100);
  EXPECT_EQ(t5->vocab_size(), pieces + 100);
  EXPECT_EQ(t5->encode("<extra_id_0>"), (std::vector<int32_t>{static_cast<int32_t>(pieces + 99)}));
  const std::string other =
      train_spm(dir, "other", "--model_type=bpe --vocab_size=700 --character_coverage=0.98 --byte_fallback=true");
  std::filesystem::copy_file(other, dir.path() / "t5" / "tokenizer.model");
  EXPECT_EQ(mf::make_tokenizer("sentencepiece", dir.file("t5"))->vocab_size(), 700);
  std::filesystem::create_directory(dir.path() / "empty");
  MFT_EXPECT_ERROR(mf::make_tokenizer("sentencepiece", dir.file("empty")), "holds no tokenizer.model or spiece.model");
  MFT_EXPECT_ERROR(mf::make_tokenizer("byte", "", "", true, 100), "extra_ids", "sentencepiece tokenizer only",
                   "'byte'");
  // tokenization.extra_ids (as training and `meshflow preprocess` read it).
  using mf::runtime::tokenizer_registry;
  mf::Config c;
  EXPECT_EQ(c.get_int("tokenization.extra_ids"), 0);
  c.set("tokenization.tokenizer_file", model, "test");
  c.set("tokenization.extra_ids", "100", "test");
  auto from_config = tokenizer_registry().create("sentencepiece", c);
  EXPECT_EQ(from_config->vocab_size(), pieces + 100);
  EXPECT_EQ(from_config->eod_id(), 1);
  EXPECT_EQ(from_config->token_to_id("<extra_id_0>"), pieces + 99);
  for (const std::string kind : {"byte", "gpt2_bpe", "hf_bpe", "wordpiece"}) {
    const std::string not_kind = "sentencepiece, not " + kind;
    MFT_EXPECT_ERROR(tokenizer_registry().create(kind, c), "tokenization.extra_ids (100", not_kind.c_str());
  }
  MFT_EXPECT_ERROR(c.set("tokenization.extra_ids", "-1", "test"), "tokenization.extra_ids=-1 is outside its range [0, 1048576]");
}

// The tiny T5 tokenizer of scripts/make_t5_tokenizer.sh (trained on the fortune corpus).
TEST(SentencePieceTokenizer, TinyT5TokenizerEncodesTheCorpus) {
  const std::string folder = mft::tokenizer_data_file("t5-tiny");
  const std::string model = mft::tokenizer_data_file("t5-tiny/spiece.model");
  auto tok = mf::make_tokenizer("sentencepiece", folder, "", true, 100);  // the folder: its spiece.model
  EXPECT_EQ(tok->vocab_size(), 2000 + 100);
  EXPECT_EQ(tok->eod_id(), 1);  // </s>
  EXPECT_EQ(tok->token_to_id("<pad>"), 0);
  EXPECT_EQ(tok->token_to_id("</s>"), 1);
  EXPECT_EQ(tok->token_to_id("<unk>"), 2);
  EXPECT_EQ(mf::SentencePieceTokenizer::from_file(model).bos_id(), -1);
  EXPECT_EQ(tok->token_to_id("<extra_id_0>"), 2099);
  EXPECT_EQ(tok->token_to_id("<extra_id_99>"), 2000);
  // fortunes-min's database, one of the files it was trained on: spm_encode's ids, and neither
  // pad, eos nor unk (character_coverage 1.0 keeps every character of the corpus).
  const std::string corpus = "/usr/share/games/fortunes/fortunes";
  ASSERT_TRUE(std::filesystem::exists(corpus)) << corpus << " is missing: bash scripts/prepare_corpus.sh (as root)";
  require_spm_tools();
  mft::TempDir dir;
  std::vector<std::string> lines;
  for (const std::string& line : read_lines(corpus))
    if (line != "%") lines.push_back(line);
  ASSERT_GT(lines.size(), 400u);
  write_lines(dir.file("lines.txt"), lines);
  const auto want = spm_encode_ids(model, dir.file("lines.txt"), dir.file("lines.ids"));
  ASSERT_EQ(want.size(), lines.size());
  int64_t total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto ids = tok->encode(lines[i]);
    EXPECT_EQ(ids, want[i]) << lines[i];
    for (int32_t id : ids) EXPECT_TRUE(id > 2 && id < 2000) << "id " << id << " in: " << lines[i];
    total += static_cast<int64_t>(ids.size());
  }
  EXPECT_GT(total, 5000);
  // Sentinels in corpus text: HF's ids around spm_encode's.
  write_lines(dir.file("stretches.txt"), {"A gift of a flower", "."});
  const auto stretches = spm_encode_ids(model, dir.file("stretches.txt"), dir.file("stretches.ids"));
  ASSERT_EQ(stretches.size(), 2u);
  std::vector<int32_t> want_mixed = {2099};
  want_mixed.insert(want_mixed.end(), stretches[0].begin(), stretches[0].end());
  want_mixed.push_back(2098);
  want_mixed.insert(want_mixed.end(), stretches[1].begin(), stretches[1].end());
  const auto with_sentinels = tok->encode("<extra_id_0>A gift of a flower<extra_id_1>.");
  EXPECT_EQ(with_sentinels, want_mixed);
  EXPECT_EQ(tok->decode(with_sentinels), "<extra_id_0>A gift of a flower<extra_id_1>.");
  const auto emoji = tok->encode("\U0001F600");  // not in the corpus: <unk>
  EXPECT_NE(std::find(emoji.begin(), emoji.end(), 2), emoji.end());
}

}  // namespace
