// BERT WordPiece (vocab.txt): every id of bert-base-uncased's tokenizer against the JavaScript
// reference encoder (tests/fixtures/wordpiece_bert.json, from scripts/make_wordpiece_fixtures.sh,
// on the vocab.txt scripts/fetch-tokenizers.sh puts in data/tokenizers/bert), then the inputs
// that reference does not follow Hugging Face's BertTokenizer on (white-space runs, CJK runs,
// ASCII symbols, format characters, special tokens, over-long words) against hand-derived ids,
// lower-casing and accents on and off, decode, and errors for bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "data_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/data/wordpiece.h"
#include "meshflow/runtime/components.h"
#include "testing.h"
#include "whitespace_fixture.h"

namespace {

using mf::WordPieceTokenizer;
using nlohmann::json;
using V = std::vector<int32_t>;

const WordPieceTokenizer& bert() {
  static const WordPieceTokenizer tok = WordPieceTokenizer::from_file(mft::tokenizer_data_file("bert/vocab.txt"));
  return tok;
}

const WordPieceTokenizer& bert_cased() {
  static const WordPieceTokenizer tok =
      WordPieceTokenizer::from_file(mft::tokenizer_data_file("bert/vocab.txt"), /*lower_case=*/false);
  return tok;
}

int32_t id(const std::string& token) {
  int32_t i = bert().token_id(token);
  EXPECT_GE(i, 0) << token;
  return i;
}

V ids(std::initializer_list<const char*> tokens) {
  V out;
  for (const char* t : tokens) out.push_back(id(t));
  return out;
}

TEST(WordPiece, EveryFixtureIdEqualsTheReference) {
  json j = json::parse(mft::slurp(mft::fixture_path("wordpiece_bert.json")));
  EXPECT_EQ(j.at("sha256").get<std::string>(), "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3");
  const json& cases = j.at("cases");
  EXPECT_GE(cases.size(), 30u);
  size_t n = 0;
  for (const json& c : cases) {
    std::string text = c.at("text").get<std::string>();
    V want = c.at("ids").get<V>();
    EXPECT_EQ(bert().encode(text), want) << text;
    n += want.size();
  }
  EXPECT_GT(n, 500u);
}

TEST(WordPiece, VocabularyAndSpecialIds) {
  const auto& t = bert();
  EXPECT_EQ(t.vocab_size(), 30522);
  EXPECT_EQ(t.name(), "wordpiece");
  EXPECT_EQ(t.unk_id(), 100);
  EXPECT_EQ(t.eod_id(), 102);  // [SEP]
  EXPECT_EQ(t.token_id("[PAD]"), 0);
  EXPECT_EQ(t.token_id("[CLS]"), 101);
  EXPECT_EQ(t.token_id("[MASK]"), 103);
  EXPECT_EQ(t.token_id("##berries"), 20968);
  EXPECT_EQ(t.token_id("no such token"), -1);
  // BERT's README example: "i like strawberries"; encode() adds no [CLS] / [SEP].
  EXPECT_EQ(t.encode("i like strawberries"), (V{1045, 2066, 13137, 20968}));
  EXPECT_EQ(t.encode(""), V{});
  EXPECT_EQ(t.encode(" \t\n "), V{});
}

TEST(WordPiece, SpecialTokensInTheTextAreNeverSplit) {
  const auto& t = bert();
  EXPECT_EQ(t.encode("[CLS] hello [SEP] world [MASK] [PAD] [UNK]"),
            (V{101, id("hello"), 102, id("world"), 103, 0, 100}));
  // Anywhere, even inside a word, and not lower-cased; other bracketed text is punctuation + words.
  EXPECT_EQ(t.encode("a[MASK]b"), (V{id("a"), 103, id("b")}));
  EXPECT_EQ(t.encode("[mask]"), (V{id("["), id("mask"), id("]")}));
  EXPECT_EQ(t.encode("[MASK"), (V{id("["), id("mask")}));
  EXPECT_EQ(t.basic_tokenize("The [MASK] sat."), (std::vector<std::string>{"the", "[MASK]", "sat", "."}));
}

TEST(WordPiece, WhiteSpaceCjkSymbolsAndControlCharacters) {
  const auto& t = bert();
  // White-space runs, leading and trailing white space: nothing (the JS reference makes [UNK]s).
  EXPECT_EQ(t.encode("  hello \t\n\r  world\u3000\u00a0! "), t.encode("hello world!"));
  // Each CJK ideograph a word of its own, also inside a Latin word.
  EXPECT_EQ(t.encode("\u4e2d\u6587"), (V{id("\u4e2d"), id("\u6587")}));
  EXPECT_EQ(t.encode("ab\u4e2dcd"), (V{id("ab"), id("\u4e2d"), id("cd")}));
  // The ASCII symbols are punctuation too.
  EXPECT_EQ(t.encode("a$b+c<d=e>f^g`h|i~j"),
            ids({"a", "$", "b", "+", "c", "<", "d", "=", "e", ">", "f", "^", "g", "`", "h", "|", "i", "~", "j"}));
  EXPECT_EQ(t.encode("(hello"), ids({"(", "hello"}));
  // Control and format characters (ZWJ, zero-width space, BOM, soft hyphen), U+0000, U+FFFD and
  // invalid UTF-8 are dropped.
  std::string dirty = "he\u200dll\u200bo\ufeff wo\u00adr";
  dirty += '\0';
  dirty += "ld\xef\xbf\xbd\xff";
  EXPECT_EQ(t.encode(dirty), t.encode("hello world"));
  // Words made only of combining marks vanish; "…" is one punctuation token (no NFKC).
  EXPECT_EQ(t.encode("a \u0301 b"), ids({"a", "b"}));
  EXPECT_EQ(t.encode("wait\u2026"), (V{id("wait"), id("\u2026")}));
  // The same accent twice is stripped twice (the JS reference strips only the first).
  EXPECT_EQ(t.encode("r\u00e9sum\u00e9"), t.encode("resume"));
}

// Every White_Space code point (and U+FEFF, U+200B, U+180E, U+001C-001F) in context, against
// transformers.js on bert-base-uncased's tokenizer.json (BertNormalizer + BertPreTokenizer, as the
// fast BertTokenizer): U+2028 / U+2029 split words, U+000B, U+000C, U+0085 and the Cf look-alikes
// are dropped.
TEST(WordPiece, WhiteSpaceCodePointsMatchTheReference) {
  mft::expect_whitespace_ids("bert", [](const std::string& t) { return bert().encode(t); });
  EXPECT_EQ(bert().encode("a\u2028b\u2029c"), (V{id("a"), id("b"), id("c")}));
}

TEST(WordPiece, UnknownAndOverLongWords) {
  const auto& t = bert();
  EXPECT_EQ(t.encode("snowman\u2603word"), V{100});  // no piece for the snowman: the whole word
  EXPECT_EQ(t.encode("hello \u2603 world"), (V{id("hello"), 100, id("world")}));
  std::string w100(100, 'a'), w101(101, 'a');
  V a100 = t.encode(w100);
  EXPECT_GT(a100.size(), 1u);
  EXPECT_TRUE(std::find(a100.begin(), a100.end(), 100) == a100.end());
  EXPECT_EQ(t.encode(w101), V{100});
  EXPECT_EQ(t.encode("x " + w101 + " y"), (V{id("x"), 100, id("y")}));
  // Characters of 2 bytes each: the limit counts characters, not bytes.
  std::string s100;
  for (int i = 0; i < 100; ++i) s100 += "\u00df";
  V sharp = t.encode(s100);
  EXPECT_EQ(sharp.size(), 100u);
  EXPECT_TRUE(std::find(sharp.begin(), sharp.end(), 100) == sharp.end());
  EXPECT_EQ(t.encode(s100 + "\u00df"), V{100});
}

TEST(WordPiece, LowerCasingAndAccentsOnAndOff) {
  const auto& lower = bert();
  const auto& cased = bert_cased();
  EXPECT_TRUE(lower.lower_case());
  EXPECT_FALSE(cased.lower_case());
  EXPECT_EQ(lower.encode("Caf\u00e9 HELLO"), (V{id("cafe"), id("hello")}));
  EXPECT_EQ(lower.encode("Cafe\u0301"), lower.encode("cafe"));
  // Without lower-casing the words stay as written (NFC): the uncased vocabulary has no "HELLO".
  EXPECT_EQ(cased.basic_tokenize("Caf\u00e9 HELLO, Cafe\u0301"),
            (std::vector<std::string>{"Caf\u00e9", "HELLO", ",", "Caf\u00e9"}));
  EXPECT_EQ(cased.encode("hello"), lower.encode("hello"));
  EXPECT_NE(cased.encode("HELLO"), lower.encode("HELLO"));
  EXPECT_EQ(cased.encode("\u00e9"), V{100});  // the uncased vocabulary has no accented letters
  EXPECT_EQ(lower.encode("\u00e9"), V{id("e")});
  // Full case mapping, as Python's str.lower(): final sigma, and İ to i + dot (then stripped).
  EXPECT_EQ(lower.basic_tokenize("\u039f\u0394\u039f\u03a3 \u0130"),
            (std::vector<std::string>{"\u03bf\u03b4\u03bf\u03c2", "i"}));
}

TEST(WordPiece, DecodeGluesContinuationsAndIsTheNormalisedText) {
  const auto& t = bert();
  EXPECT_EQ(t.decode(V{1045, 2066, 13137, 20968}), "i like strawberries");
  EXPECT_EQ(t.decode(V{101, 1045, 102}), "[CLS] i [SEP]");
  EXPECT_EQ(t.decode(V{}), "");
  // Lossy: decode(encode(s)) is the normalised text.
  EXPECT_EQ(t.decode(t.encode("  Hello,   W\u00f6rld!\tI'm \u4e2d\u6587  ")), "hello , world ! i ' m \u4e2d \u6587");
  EXPECT_EQ(t.decode(t.encode("snowman\u2603word [MASK]")), "[UNK] [MASK]");
  MFT_EXPECT_ERROR(t.decode(V{30522}), "id 30522 outside [0, 30522)");
  MFT_EXPECT_ERROR(t.decode(V{-1}), "id -1");
}

TEST(WordPiece, MakeTokenizerAndTheRegistry) {
  std::string file = mft::tokenizer_data_file("bert/vocab.txt");
  std::string folder = std::filesystem::path(file).parent_path().string();
  for (const std::string& p : {file, folder}) {
    auto t = mf::make_tokenizer("wordpiece", p);
    EXPECT_EQ(t->name(), "wordpiece");
    EXPECT_EQ(t->vocab_size(), 30522);
    EXPECT_EQ(t->eod_id(), 102);
    EXPECT_EQ(t->encode("Hello"), V{7592});
  }
  EXPECT_EQ(mf::make_tokenizer("wordpiece", folder, "[CLS]")->eod_id(), 101);
  EXPECT_NE(mf::make_tokenizer("wordpiece", folder, "", false)->encode("Hello"), V{7592});
  mf::Config c;
  c.apply_override("tokenization.tokenizer_file=" + folder);
  EXPECT_TRUE(c.get_bool("tokenization.do_lower_case"));
  EXPECT_EQ(mf::runtime::tokenizer_registry().create("wordpiece", c)->encode("Hello"), V{7592});
  c.apply_override("tokenization.do_lower_case=false");
  EXPECT_EQ(mf::runtime::tokenizer_registry().create("wordpiece", c)->encode("Hello"), V{100});
  MFT_EXPECT_ERROR(mf::runtime::tokenizer_registry().create("wordpiece", mf::Config()), "needs tokenization.tokenizer_file");
}

TEST(WordPiece, BadVocabularyFilesNameTheFile) {
  mft::TempDir dir;
  std::string missing = dir.file("nope.txt"), folder = dir.path().string();
  MFT_EXPECT_ERROR(WordPieceTokenizer::from_file(missing), missing.c_str(), "no such file");
  MFT_EXPECT_ERROR(mf::make_tokenizer("wordpiece", folder), folder.c_str(), "holds no vocab.txt");
  MFT_EXPECT_ERROR(mf::make_tokenizer("wordpiece", ""), "needs a vocab.txt");
  std::string empty = dir.file("empty.txt");
  mft::write_text(empty, "");
  MFT_EXPECT_ERROR(WordPieceTokenizer::from_file(empty), empty.c_str(), "empty");
  std::string no_unk = dir.file("no_unk.txt");
  mft::write_text(no_unk, "[PAD]\n[SEP]\nhello\n");
  MFT_EXPECT_ERROR(WordPieceTokenizer::from_file(no_unk), no_unk.c_str(), "no [UNK]");
  std::string no_sep = dir.file("no_sep.txt");
  mft::write_text(no_sep, "[PAD]\n[UNK]\nhello\n");
  MFT_EXPECT_ERROR(WordPieceTokenizer::from_file(no_sep), no_sep.c_str(), "[SEP]", "is not in it");
  MFT_EXPECT_ERROR(WordPieceTokenizer::from_file(no_sep, true, "[EOD]"), no_sep.c_str(), "[EOD]",
                   "tokenization.eod_token");
  // A small vocabulary (CRLF lines): greedy longest match, "##" continuations.
  std::string small = dir.file("vocab.txt");
  mft::write_text(small, "[PAD]\r\n[UNK]\r\n[SEP]\r\nun\r\nunaff\r\n##able\r\n##a\r\n##ff\r\n");
  auto t = WordPieceTokenizer::from_file(small);
  EXPECT_EQ(t.encode("unaffable"), (V{4, 5}));
  EXPECT_EQ(t.encode("unaff unffa"), (V{4, 3, 7, 6}));
  EXPECT_EQ(t.encode("unb"), V{1});
  EXPECT_EQ(t.decode(V{3, 7, 6}), "unffa");
}

}  // namespace
