// Hugging Face tokenizer.json BPE: every id of Llama 3's and Qwen3's (Qwen2's) byte-level
// tokenizer against the JavaScript reference encoder (tests/fixtures/hf_bpe_*.json, from
// scripts/make_llama_tokenizer_fixtures.sh, on the files scripts/fetch-tokenizers.sh puts in
// data/tokenizers), Llama 2's byte-fallback one against transformers.js and SentencePiece, the
// Llama 3 / Qwen2 pre-tokeniser's splits, GPT-2 written as a tokenizer.json, special tokens,
// round trips, and errors for bad files.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "data_testing.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/llama3_pretokenize.h"
#include "meshflow/data/sentencepiece.h"
#include "testing.h"
#include "whitespace_fixture.h"

namespace {

using mf::HfBpeTokenizer;
using nlohmann::json;

const HfBpeTokenizer& llama3() {
  static const HfBpeTokenizer tok = HfBpeTokenizer::from_file(mft::tokenizer_data_file("llama3/tokenizer.json"));
  return tok;
}

const HfBpeTokenizer& qwen() {
  static const HfBpeTokenizer tok = HfBpeTokenizer::from_file(mft::tokenizer_data_file("qwen3/tokenizer.json"));
  return tok;
}

json cases(const std::string& fixture) {
  json j = json::parse(mft::slurp(mft::fixture_path(fixture)));
  EXPECT_GE(j.at("cases").size(), 40u);
  return j.at("cases");
}

std::vector<std::string> split(std::string_view s, int max_number_run) {
  std::vector<std::string_view> p;
  mf::llama3_pretokenize(s, max_number_run, p);
  return std::vector<std::string>(p.begin(), p.end());
}

// Expected splits: what JavaScript's regex engine gives for the pattern, \s read as \p{White_Space}
// (as transformers.js and Oniguruma read it).
TEST(Llama3Pretokenize, SplitsLikeTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world", 3), (V{"Hello", " world"}));
  EXPECT_EQ(split("a   b", 3), (V{"a", "  ", " b"}));
  EXPECT_EQ(split("end   ", 3), (V{"end", "   "}));
  EXPECT_EQ(split("1234567 x12", 3), (V{"123", "456", "7", " x", "12"}));
  EXPECT_EQ(split("1234 x", 1), (V{"1", "2", "3", "4", " x"}));
  EXPECT_EQ(split("IT'S we'Ll 'x", 3), (V{"IT", "'S", " we", "'Ll", " '", "x"}));
  EXPECT_EQ(split("foo.\n\nbar", 3), (V{"foo", ".\n\n", "bar"}));
  EXPECT_EQ(split("a \n\n b", 3), (V{"a", " \n\n", " b"}));
  EXPECT_EQ(split("x  \n", 3), (V{"x", "  \n"}));
  EXPECT_EQ(split("\tword ,comma \xe3\x80\x80wide", 3), (V{"\tword", " ,", "comma", " ", "\xe3\x80\x80wide"}));
  EXPECT_EQ(split(" 123 !? ", 3), (V{" ", "123", " !?", " "}));
  EXPECT_EQ(split("\r\nx", 3), (V{"\r\n", "x"}));
  EXPECT_EQ(split("\u4f60\u597d\uff0c\u4e16\u754c", 3), (V{"\u4f60\u597d", "\uff0c\u4e16\u754c"}));
  std::string bad = "ab\xff\xfe cd\xc3 \n";
  std::string joined;
  for (auto& s : split(bad, 3)) joined += s;
  EXPECT_EQ(joined, bad);
  EXPECT_EQ(mf::llama3_pattern_number_run(mf::kLlama3SplitRegex), 3);
  EXPECT_EQ(mf::llama3_pattern_number_run(mf::kQwen2SplitRegex), 1);
  EXPECT_FALSE(mf::llama3_pattern_number_run("\\s+"));
}

TEST(HfBpeTokenizer, Llama3MatchesReferenceEncoderIds) {
  const auto& tok = llama3();
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.num_merges(), 280147);
  EXPECT_EQ(tok.num_added_tokens(), 256);
  EXPECT_EQ(tok.eod_id(), 128001);  // <|end_of_text|>
  for (const auto& c : cases("hf_bpe_llama3.json")) {
    std::string text = c.at("text");
    std::vector<int32_t> want = c.at("ids");
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
    EXPECT_EQ(tok.encode(text), want) << "cached, text: " << text;
    EXPECT_EQ(tok.decode(want), text);
  }
}

TEST(HfBpeTokenizer, QwenMatchesReferenceEncoderIdsAfterNfc) {
  const auto& tok = qwen();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.eod_id(), 151643);  // <|endoftext|>
  int not_nfc = 0;
  for (const auto& c : cases("hf_bpe_qwen3.json")) {
    std::string text = c.at("text");
    std::vector<int32_t> want = c.at("ids");
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
    if (c.at("nfc").get<bool>())
      EXPECT_EQ(tok.decode(want), text);
    else
      ++not_nfc;
  }
  EXPECT_GE(not_nfc, 1);  // the normaliser is exercised
}

// Every White_Space code point (and U+FEFF, U+200B, U+180E, U+001C-001F) in context, against
// transformers.js on the same tokenizer.json (\s is White_Space there, as in Hugging Face's tokenizers).
TEST(HfBpeTokenizer, Llama3WhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("llama3", [](const std::string& t) { return llama3().encode(t); });
}

TEST(HfBpeTokenizer, QwenWhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("qwen3", [](const std::string& t) { return qwen().encode(t); });
}

TEST(HfBpeTokenizer, SpecialTokensRoundTripsAndThreads) {
  const auto& tok = llama3();
  using V = std::vector<int32_t>;
  EXPECT_EQ(tok.encode("<|begin_of_text|>"), (V{128000}));
  EXPECT_EQ(tok.encode("a<|end_of_text|>b"), (V{64, 128001, 65}));
  EXPECT_EQ(tok.decode(V{128000, 9906, 128001}), "<|begin_of_text|>Hello<|end_of_text|>");
  EXPECT_EQ(tok.token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(tok.token_id("Hello"), 9906);
  EXPECT_EQ(tok.token_id("no such token"), -1);
  EXPECT_EQ(qwen().encode("<|im_start|>"), (V{151644}));
  std::string all;
  for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
  for (const HfBpeTokenizer* t : {&llama3(), &qwen()}) {
    EXPECT_EQ(t->decode(t->encode(all)), all);
    EXPECT_EQ(t->decode(t->encode("ab\xff\xfe cd\xc3 \n")), "ab\xff\xfe cd\xc3 \n");
    EXPECT_TRUE(t->encode("").empty());
    const std::string past_end = std::to_string(t->vocab_size());
    MFT_EXPECT_ERROR(t->decode(V{static_cast<int32_t>(t->vocab_size())}), past_end.c_str());
  }
  auto fx = cases("hf_bpe_llama3.json");
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r)
        for (const auto& c : fx)
          if (tok.encode(c.at("text").get<std::string>()) != c.at("ids").get<V>()) ++bad[t];
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

// Llama 2's tokenizer.json (BPE with byte fallback, Llama 2's metaspace normaliser and decoder)
// against transformers.js (tests/fixtures/hf_bpe_llama2.json, from
// scripts/make_hf_llama2_fixture.sh): every id and every decoding; and against the same model's
// tokenizer.model through SentencePiece on every text where both read the text alike (the
// tokenizer.json takes <s>, </s> and <unk> written in the text as those tokens, SentencePiece as
// text).
const HfBpeTokenizer& llama2_json() {
  static const HfBpeTokenizer tok = HfBpeTokenizer::from_file(mft::tokenizer_data_file("llama2/tokenizer.json"));
  return tok;
}

TEST(HfBpeTokenizer, Llama2MatchesTransformersJsAndSentencePiece) {
  const auto& tok = llama2_json();
  const auto spm = mf::SentencePieceTokenizer::from_file(mft::tokenizer_data_file("llama2/tokenizer.model"));
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.num_merges(), 61249);
  EXPECT_EQ(tok.eod_id(), 2);  // </s>
  int compared_with_spm = 0, round_trips = 0;
  for (const auto& c : cases("hf_bpe_llama2.json")) {
    const std::string text = c.at("text");
    const std::vector<int32_t> want = c.at("ids");
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
    EXPECT_EQ(tok.encode(text), want) << "cached, text: " << text;
    EXPECT_EQ(tok.decode(want), c.at("decoded").get<std::string>()) << "text: " << text;
    bool as_text = true;
    for (const char* special : {"<s>", "</s>", "<unk>", "\u2581"}) as_text &= text.find(special) == std::string::npos;
    if (!as_text) continue;
    EXPECT_EQ(spm.encode(text), want) << "SentencePiece, text: " << text;
    EXPECT_EQ(tok.decode(want), text);
    ++compared_with_spm;
    round_trips += tok.decode(tok.encode(text)) == text;
  }
  EXPECT_GE(compared_with_spm, 55);
  EXPECT_EQ(round_trips, compared_with_spm);
}

// The White_Space fixture's Llama 2 ids (llama-tokenizer-js) through tokenizer.json as well.
TEST(HfBpeTokenizer, Llama2JsonWhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("llama2", [](const std::string& t) { return llama2_json().encode(t); });
}

TEST(HfBpeTokenizer, Llama2ByteFallbackSpacesAndTokens) {
  const auto& tok = llama2_json();
  using V = std::vector<int32_t>;
  // A character outside the vocabulary: the <0xNN> tokens of its UTF-8 bytes (id = 3 + byte).
  EXPECT_EQ(tok.encode("\U0001F999"), (V{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}));
  EXPECT_EQ(tok.decode(V{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}), "\U0001F999");
  EXPECT_EQ(tok.encode("\n"), (V{29871, 13}));  // "▁" then <0x0A>
  EXPECT_EQ(tok.encode("Hello world"), (V{15043, 3186}));
  EXPECT_TRUE(tok.encode("").empty());
  // Bytes that are not UTF-8 fall back one by one and decode as themselves.
  const std::string bad = "ab\xff\xfe cd\xc3 \n";
  EXPECT_EQ(tok.decode(tok.encode(bad)), bad);
  std::string all;
  for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  // Only the first "▁" of the text loses its space; an added token keeps its text.
  EXPECT_EQ(tok.decode(V{3186, 3186}), "world world");
  EXPECT_EQ(tok.decode(V{1, 15043}), "<s> Hello");
  EXPECT_EQ(tok.token_to_id("\u2581Hello"), 15043);
  EXPECT_EQ(tok.token_to_id("<0x0A>"), 13);
  EXPECT_EQ(tok.token_to_id("</s>"), 2);
  EXPECT_FALSE(tok.token_to_id("no such token").has_value());
  EXPECT_EQ(tok.id_to_token(15043), "\u2581Hello");
  EXPECT_EQ(tok.id_to_token(13), "<0x0A>");
  MFT_EXPECT_ERROR(tok.decode(V{32000}), "32000");
  // The factory: --tokenizer hf_bpe --tokenizer-file .../tokenizer.json.
  auto made = mf::make_tokenizer("hf_bpe", mft::tokenizer_data_file("llama2/tokenizer.json"));
  EXPECT_EQ(made->encode("Hello world"), (V{15043, 3186}));
  EXPECT_EQ(made->eod_id(), 2);
}

// A small tokenizer.json with byte fallback: <unk> <s> </s>, the 256 byte tokens, "▁", "a", "b"
// and three merges.
json tiny_byte_fallback_tokenizer() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  for (const char* t : {"\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"}) vocab[t] = static_cast<int>(vocab.size());
  json special = {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}};
  return {{"added_tokens", {special}},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                                 {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                                                  {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder", {{"type", "Sequence"},
                       {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true}, {"unk_token", "<unk>"},
                     {"vocab", vocab}, {"merges", {"\u2581 a", "a b", "\u2581a b"}}}}};
}

TEST(HfBpeTokenizer, ByteFallbackTokenizerEncodesAndRefusesWhatItCannot) {
  mft::TempDir dir;
  const std::string file = dir.file("tokenizer.json");
  mft::write_text(file, tiny_byte_fallback_tokenizer().dump());
  HfBpeTokenizer tok = HfBpeTokenizer::from_file(file);
  using V = std::vector<int32_t>;
  EXPECT_EQ(tok.vocab_size(), 265);
  EXPECT_EQ(tok.eod_id(), 2);  // </s>
  EXPECT_EQ(tok.encode("ab ab"), (V{264, 264}));  // "▁ab▁ab"
  EXPECT_EQ(tok.encode("b  a"), (V{259, 261, 259, 262}));  // "▁b▁▁a": "▁" "b" "▁" "▁a"
  EXPECT_EQ(tok.encode("\xc3\xa9</s>a"), (V{259, 3 + 0xC3, 3 + 0xA9, 2, 262}));
  EXPECT_EQ(tok.decode(V{264, 264}), "ab ab");
  EXPECT_EQ(tok.decode(V{259, 3 + 0xC3, 3 + 0xA9, 2, 262}), "\xc3\xa9</s> a");
  auto expect_bad = [&](const json& j, const char* want) {
    mft::write_text(file, j.dump());
    MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file), file.c_str(), want);
  };
  json j = tiny_byte_fallback_tokenizer();
  j["model"]["vocab"].erase("<0x41>");
  expect_bad(j, "no token <0x41>");
  j = tiny_byte_fallback_tokenizer();
  j["normalizer"] = nullptr;
  expect_bad(j, "normalizer");
  j = tiny_byte_fallback_tokenizer();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}};
  expect_bad(j, "pre_tokenizer");
  j = tiny_byte_fallback_tokenizer();
  j["decoder"]["decoders"][3]["start"] = 2;
  expect_bad(j, "decoder");
  j = tiny_byte_fallback_tokenizer();
  j["added_tokens"][0]["normalized"] = true;
  expect_bad(j, "normalized");
}

// GPT-2's encoder.json + vocab.bpe written as a tokenizer.json (ByteLevel pre-tokenizer with
// GPT-2's regex; merges as strings or as pairs) give the GPT-2 reference ids.
TEST(HfBpeTokenizer, Gpt2AsTokenizerJsonMatchesGpt2Ids) {
  mft::TempDir dir;
  const std::string src = mft::gpt2_vocab_dir();
  json merges = json::array(), pairs = json::array();
  std::istringstream in(mft::slurp(src + "/vocab.bpe"));
  std::string line;
  std::getline(in, line);  // #version
  while (std::getline(in, line))
    if (!line.empty()) {
      merges.push_back(line);
      pairs.push_back({line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1)});
    }
  json j = {{"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", json::parse(mft::slurp(src + "/encoder.json"))}, {"merges", merges}}}};
  json fx = json::parse(mft::slurp(mft::fixture_path("gpt2_bpe.json")));
  for (bool as_pairs : {false, true}) {
    j["model"]["merges"] = as_pairs ? pairs : merges;
    mft::write_text(dir.file("tokenizer.json"), j.dump());
    HfBpeTokenizer tok = HfBpeTokenizer::from_file(dir.file("tokenizer.json"));
    EXPECT_EQ(tok.vocab_size(), 50257);
    EXPECT_EQ(tok.eod_id(), 50256);
    for (const auto& f : fx) {
      std::string text = f.at("text");
      if (text.find("<|endoftext|>") != std::string::npos) continue;  // an added token here, text in GPT-2
      EXPECT_EQ(tok.encode(text), f.at("ids").get<std::vector<int32_t>>()) << text;
    }
  }
}

// A small valid tokenizer.json: the 256 byte tokens, "ab" from one merge, one added token.
json tiny_tokenizer() {
  json vocab = json::object();
  const auto& alphabet = mf::Gpt2BpeTokenizer::byte_to_unicode();
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = b;
  vocab["ab"] = 256;
  json split = {{"type", "Split"}, {"pattern", {{"Regex", std::string(mf::kLlama3SplitRegex)}}}, {"behavior", "Isolated"}};
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  return {{"added_tokens", {{{"id", 257}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
}

TEST(HfBpeTokenizer, EndOfDocumentChoice) {
  mft::TempDir dir;
  const std::string file = dir.file("tokenizer.json");
  json j = tiny_tokenizer();
  mft::write_text(file, j.dump());
  EXPECT_EQ(HfBpeTokenizer::from_file(file).eod_id(), 257);  // <|endoftext|>
  EXPECT_EQ(HfBpeTokenizer::from_file(file, "ab").eod_id(), 256);
  MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file, "<|nope|>"), file.c_str(), "<|nope|>", "not a token");
  // Without the usual names: the eos_token of tokenizer_config.json beside the file.
  j["added_tokens"][0]["content"] = "<|the_end|>";
  mft::write_text(file, j.dump());
  MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file), file.c_str(), "set tokenization.eod_token");
  mft::write_text(dir.file("tokenizer_config.json"), R"({"eos_token": {"content": "<|the_end|>"}})");
  EXPECT_EQ(HfBpeTokenizer::from_file(file).eod_id(), 257);
  mft::write_text(dir.file("tokenizer_config.json"), R"({"eos_token": "</s>"})");
  MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file), "'</s>'", "tokenizer_config.json", "not a token");
}

TEST(HfBpeTokenizer, BadFilesThrowNamingTheFile) {
  mft::TempDir dir;
  const std::string file = dir.file("tokenizer.json");
  auto expect_bad = [&](const json& j, const char* want) {
    mft::write_text(file, j.dump());
    MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file), file.c_str(), want);
  };
  mft::write_text(file, tiny_tokenizer().dump());
  HfBpeTokenizer tiny = HfBpeTokenizer::from_file(file);
  EXPECT_EQ(tiny.encode("abc<|endoftext|>"), (std::vector<int32_t>{256, 'c', 257}));
  MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(dir.file("missing.json")), "missing.json");
  mft::write_text(file, "{\"model\": ");
  MFT_EXPECT_ERROR(HfBpeTokenizer::from_file(file), file.c_str(), "JSON");
  json j = tiny_tokenizer();
  j["model"]["type"] = "WordPiece";
  expect_bad(j, "BPE");
  j = tiny_tokenizer();
  j["model"]["byte_fallback"] = true;  // byte fallback without the <0xNN> tokens
  expect_bad(j, "byte_fallback");
  j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  expect_bad(j, "not Llama 3's or Qwen2's");
  j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][1].erase("use_regex");
  expect_bad(j, "use_regex false");
  j = tiny_tokenizer();
  j["normalizer"] = {{"type", "NFKC"}};
  expect_bad(j, "normalizer");
  j = tiny_tokenizer();
  j["added_tokens"][0]["lstrip"] = true;
  expect_bad(j, "lstrip");
  j = tiny_tokenizer();
  j["model"]["vocab"]["ab"] = 257;  // shared with the added token: no token is left for id 256
  expect_bad(j, "id 256 has no token");
  j = tiny_tokenizer();
  j["model"]["merges"] = {"a zz"};
  expect_bad(j, "merges[0]");
  j = tiny_tokenizer();
  j["model"]["merges"] = {"a b c"};
  expect_bad(j, "two tokens");
  j = tiny_tokenizer();
  j["model"]["vocab"]["\xe4\xbd\xa0"] = 258;
  expect_bad(j, "byte-level alphabet");
  j = tiny_tokenizer();
  j["model"]["vocab"].erase("a");
  expect_bad(j, "no token for byte 97");
  // An input that broke the loader (seen writing fuzz/hf_bpe_fuzz.cpp): a large id asked for that
  // many empty slots (2^30 - 1: 32 GiB) before the gap check; ids are now bounded by the token count.
  j = tiny_tokenizer();
  j["model"]["vocab"]["ab"] = (1 << 30) - 1;
  expect_bad(j, "out of range (258 tokens");
  j = tiny_tokenizer();
  j["added_tokens"][0]["id"] = 100000000;
  expect_bad(j, "out of range (258 tokens");
}

}  // namespace
