// Corpus preprocessing (Megatron's tools/preprocess_data.py): read documents from jsonl or
// plain-text files, tokenize them, optionally append the end-of-document token, and write the
// indexed dataset `<output_prefix>_<json_key>_document.{bin,idx}` (Megatron's naming; the key
// is "text" by default, for text files too). As Megatron, every document that tokenizes to at
// least one id is kept (one of white space only too); those that tokenize to nothing are skipped
// and counted. Inputs must be regular files (not a device or a pipe, which may never end).
// On any error nothing is written (the outputs are committed atomically at the end).
// With split_sentences (Megatron's --split-sentences) each document is split into sentences
// (split_sentences(), sentence_split.h), each tokenized into a sequence of its own, and the
// output is `<output_prefix>_<json_key>_sentence.{bin,idx}`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/tokenizer.h"

namespace mf {

enum class InputFormat {
  kAuto,   // by extension: .jsonl / .json -> kJsonl, anything else -> kText
  kJsonl,  // one JSON object per line; the document is the string under json_key (blank lines skipped)
  kText,   // plain text split into documents by text_split
};

enum class TextSplit {
  kSeparatorLine,  // documents separated by lines equal to `separator` (e.g. "%" in fortune files)
  kBlankLine,      // documents separated by one or more blank (white-space only) lines
  kWholeFile,      // each file is one document
};

struct PreprocessOptions {
  InputFormat format = InputFormat::kAuto;
  std::string json_key = "text";
  TextSplit text_split = TextSplit::kSeparatorLine;
  std::string separator = "%";
  bool append_eod = true;
  // Token dtype in .bin; unset: Megatron's choice from the vocabulary size (optimal_index_dtype).
  std::optional<IndexDType> dtype;
  // Set: documents are written in a seeded random order (of all inputs together), so that the
  // train/valid/test split by document ranges does not follow the input files.
  std::optional<uint64_t> shuffle_seed;
  // One sequence per sentence (BERT's sentence pairs need them); the end-of-document token is
  // appended to the document's last sentence; sentences that tokenize to nothing are skipped.
  bool split_sentences = false;
};

struct PreprocessResult {
  std::string prefix;  // <output_prefix>_<json_key>_document (_sentence): open it with IndexedDataset
  int64_t documents = 0;
  int64_t sequences = 0;  // = documents, or the sentences with split_sentences
  int64_t tokens = 0;   // eod tokens included
  int64_t bytes_in = 0; // document text bytes tokenized
  int64_t dropped_empty = 0;  // documents (or, with split_sentences, documents of sentences) that tokenize to no ids
};

// Reads `inputs` in order. Throws mf::Error naming the file (and line, for jsonl) for a missing
// file, one that is not a regular file, an invalid JSON line, a line that is not an object, a missing or non-string key.
PreprocessResult preprocess(const std::vector<std::string>& inputs, const std::string& output_prefix,
                            const Tokenizer& tokenizer, const PreprocessOptions& options = {});

// Splits one text (a file's contents) into documents as kText would; exposed for tests and tools.
std::vector<std::string> split_text_documents(const std::string& text, TextSplit mode, const std::string& separator);

}  // namespace mf
