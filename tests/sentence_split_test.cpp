// split_sentences (the rule-based punkt-like splitter), the indexed dataset builder's
// several-sequence documents (Megatron's --split-sentences layout), and preprocess() with
// split_sentences.
#include <gtest/gtest.h>

#include <algorithm>

#include "data_testing.h"
#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/data/sentence_split.h"
#include "testing.h"

namespace {

using V = std::vector<std::string>;
using mf::split_sentences;

TEST(SentenceSplit, PlainTerminators) {
  EXPECT_EQ(split_sentences("Hello world. This is a test! Is it? Yes."),
            (V{"Hello world.", "This is a test!", "Is it?", "Yes."}));
  EXPECT_EQ(split_sentences("Wait... What?! No way."), (V{"Wait...", "What?!", "No way."}));
  EXPECT_EQ(split_sentences("It ended in 1999. 2000 was next."), (V{"It ended in 1999.", "2000 was next."}));
  // Lower case after the terminator: not a sentence start.
  EXPECT_EQ(split_sentences("Wait... what now? nothing."), (V{"Wait... what now? nothing."}));
  EXPECT_EQ(split_sentences("No space.Here"), (V{"No space.Here"}));
}

TEST(SentenceSplit, AbbreviationsInitialsAndNumbers) {
  EXPECT_EQ(split_sentences("Mr. Smith met Dr. Jones at St. Mary's. They talked."),
            (V{"Mr. Smith met Dr. Jones at St. Mary's.", "They talked."}));
  EXPECT_EQ(split_sentences("J. R. R. Tolkien wrote books. They sold well."),
            (V{"J. R. R. Tolkien wrote books.", "They sold well."}));
  EXPECT_EQ(split_sentences("Pi is 3.14 roughly. The value 2.5 is less."),
            (V{"Pi is 3.14 roughly.", "The value 2.5 is less."}));
  EXPECT_EQ(split_sentences("See Fig. 3 and No. 7. Apples, pears, etc. Are fruit (e.g. Pears). Done."),
            (V{"See Fig. 3 and No. 7.", "Apples, pears, etc. Are fruit (e.g. Pears).", "Done."}));
  EXPECT_EQ(split_sentences("The U.S. Army and Acme Inc. Work together. Prof. X agrees."),
            (V{"The U.S. Army and Acme Inc. Work together.", "Prof. X agrees."}));
  EXPECT_EQ(split_sentences("He has a Ph.D. In physics."), (V{"He has a Ph.D. In physics."}));
}

TEST(SentenceSplit, QuotesBracketsAndUnicode) {
  EXPECT_EQ(split_sentences("He said \"Stop.\" Then he left."), (V{"He said \"Stop.\"", "Then he left."}));
  EXPECT_EQ(split_sentences("Done. (Really.) \"Yes.\" 'Fine.'"), (V{"Done.", "(Really.)", "\"Yes.\"", "'Fine.'"}));
  // Curly quotes, and a non-ASCII capital starting the next sentence.
  EXPECT_EQ(split_sentences("Er sagte \xe2\x80\x9cHallo.\xe2\x80\x9d \xc3\x84rger folgt."),
            (V{"Er sagte \xe2\x80\x9cHallo.\xe2\x80\x9d", "\xc3\x84rger folgt."}));
  EXPECT_EQ(split_sentences("Fin. \xe2\x80\x9cNext\xe2\x80\x9d one."), (V{"Fin.", "\xe2\x80\x9cNext\xe2\x80\x9d one."}));
}

TEST(SentenceSplit, BlankLinesWhiteSpaceAndEmpties) {
  EXPECT_EQ(split_sentences("A heading without a period\n\nSecond paragraph. Next one"),
            (V{"A heading without a period", "Second paragraph.", "Next one"}));
  EXPECT_EQ(split_sentences("line one\nline two.\n \t\n\nlast"), (V{"line one\nline two.", "last"}));
  EXPECT_EQ(split_sentences("  One.  \n"), (V{"One."}));
  EXPECT_EQ(split_sentences("Ends here.\r\n\r\nNew."), (V{"Ends here.", "New."}));
  EXPECT_TRUE(split_sentences("").empty());
  EXPECT_TRUE(split_sentences("  \n\n \t ").empty());
  EXPECT_EQ(split_sentences("!!! ?"), (V{"!!! ?"}));  // "?" starts no sentence
}

TEST(IndexedDatasetSentences, BuilderWritesMegatronsSentenceLayout) {
  mft::TempDir dir;
  const std::string prefix = dir.file("s");
  {
    mf::IndexedDatasetBuilder b(prefix, mf::IndexDType::kU16);
    b.add_document(std::vector<std::vector<int32_t>>{{1, 2}, {3}, {4, 5, 6}});
    b.add_document(std::vector<int32_t>{7, 8});
    b.add_document(std::vector<std::vector<int32_t>>{});  // no sentence: no document
    b.add_sentence(std::vector<int32_t>{9});
    b.add_sentence(std::vector<int32_t>{});
    b.end_document();
    b.end_document();  // nothing open: no-op
    b.add_sentence(std::vector<int32_t>{10});
    EXPECT_EQ(b.num_documents(), 3);
    EXPECT_EQ(b.num_sequences(), 7);
    b.finalize();  // closes the open document
  }
  mf::IndexedDataset ds(prefix);
  EXPECT_EQ(ds.num_sequences(), 7);
  EXPECT_EQ(ds.num_documents(), 4);
  EXPECT_EQ(ds.sequence_lengths(), (std::vector<int32_t>{2, 1, 3, 2, 1, 0, 1}));
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 3, 4, 6, 7}));
  EXPECT_EQ(ds.sequence(2), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(ds.sequence(6), (std::vector<int32_t>{10}));
  // Header 34 bytes, 12 per sequence, 8 per document index.
  EXPECT_EQ(mft::slurp(mf::index_file_path(prefix)).size(), 34u + 7 * 12 + 5 * 8);
}

TEST(PreprocessSentences, OneSequencePerSentenceEodOnTheLast) {
  mft::TempDir dir;
  mft::write_text(dir.file("in.txt"),
                  "First one. Second one? Third!\n%\nOnly a single sentence here\n%\n  \n%\nDr. Who arrived. He left.\n");
  mf::ByteTokenizer tok;
  mf::PreprocessOptions o;
  o.split_sentences = true;
  mf::PreprocessResult r = mf::preprocess({dir.file("in.txt")}, dir.file("out"), tok, o);
  EXPECT_EQ(r.prefix, dir.file("out") + "_text_sentence");
  EXPECT_EQ(r.documents, 3);
  EXPECT_EQ(r.sequences, 6);
  mf::IndexedDataset ds(r.prefix);
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 3, 4, 6}));
  auto ids = [&](const std::string& s, bool eod) {
    std::vector<int32_t> v = tok.encode(s);
    if (eod) v.push_back(tok.eod_id());
    return v;
  };
  EXPECT_EQ(ds.sequence(0), ids("First one.", false));
  EXPECT_EQ(ds.sequence(1), ids("Second one?", false));
  EXPECT_EQ(ds.sequence(2), ids("Third!", true));
  EXPECT_EQ(ds.sequence(3), ids("Only a single sentence here", true));
  EXPECT_EQ(ds.sequence(4), ids("Dr. Who arrived.", false));
  EXPECT_EQ(ds.sequence(5), ids("He left.", true));
  EXPECT_EQ(r.tokens, ds.num_tokens());

  // Without eod, shuffled: the same documents of the same sentences, in another order.
  o.append_eod = false;
  o.shuffle_seed = 7;
  mf::PreprocessResult r2 = mf::preprocess({dir.file("in.txt")}, dir.file("shuf"), tok, o);
  mf::IndexedDataset ds2(r2.prefix);
  ASSERT_EQ(ds2.num_documents(), 3);
  std::vector<std::vector<std::vector<int32_t>>> got, want = {{ids("First one.", false), ids("Second one?", false),
                                                               ids("Third!", false)},
                                                              {ids("Only a single sentence here", false)},
                                                              {ids("Dr. Who arrived.", false), ids("He left.", false)}};
  for (int64_t d = 0; d < 3; ++d) {
    got.emplace_back();
    for (int64_t s = ds2.document_indices()[d]; s < ds2.document_indices()[d + 1]; ++s) got.back().push_back(ds2.sequence(s));
  }
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(PreprocessSentences, JsonlDocumentsAndSkippedEmptyOnes) {
  mft::TempDir dir;
  mft::write_text(dir.file("in.jsonl"), "{\"text\": \"Ab cd. Ef gh.\"}\n{\"text\": \"   \"}\n{\"text\": \"Solo.\"}\n");
  mf::ByteTokenizer tok;
  mf::PreprocessOptions o;
  o.split_sentences = true;
  mf::PreprocessResult r = mf::preprocess({dir.file("in.jsonl")}, dir.file("j"), tok, o);
  mf::IndexedDataset ds(r.prefix);
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(ds.sequence(1), (std::vector<int32_t>{'E', 'f', ' ', 'g', 'h', '.', mf::ByteTokenizer::kEod}));
}

}  // namespace
