// preprocess(): documents from jsonl / text files -> tokens -> indexed dataset.
#include "meshflow/data/preprocess.h"
#include "meshflow/data/jsonl.h"
#include "meshflow/data/sentence_split.h"
#include "meshflow/data/shuffle.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"

namespace mf {
namespace {

const char* file_kind(std::filesystem::file_type t) {
  switch (t) {
    case std::filesystem::file_type::directory: return "a folder";
    case std::filesystem::file_type::character: return "a character device";
    case std::filesystem::file_type::block: return "a block device";
    case std::filesystem::file_type::fifo: return "a pipe";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a plain file";
  }
}

using Document = std::vector<std::vector<int32_t>>;  // its sequences

class DocumentSink {
 public:
  DocumentSink(IndexedDatasetBuilder& builder, const Tokenizer& tok, bool eod, bool sentences, PreprocessResult& r,
               std::vector<Document>* held)
      : builder_(builder), tok_(tok), eod_(eod), sentences_(sentences), r_(r), held_(held) {}
  // Megatron keeps every document that tokenizes to at least one id (white space alone included);
  // one that tokenizes to none is counted in dropped_empty.
  void add(std::string_view text) {
    Document doc;
    if (sentences_) {
      // Megatron: each sentence tokenized alone, empty ones dropped, eod on the last one.
      for (const std::string& s : split_sentences(text)) {
        std::vector<int32_t> ids = tok_.encode(s);
        if (!ids.empty()) doc.push_back(std::move(ids));
      }
      if (doc.empty()) {
        ++r_.dropped_empty;
        return;
      }
      if (eod_) doc.back().push_back(tok_.eod_id());
    } else {
      std::vector<int32_t> ids = tok_.encode(text);
      if (ids.empty()) {  // no end-of-document token alone either (Megatron's rule)
        ++r_.dropped_empty;
        return;
      }
      if (eod_) ids.push_back(tok_.eod_id());
      doc.push_back(std::move(ids));
    }
    ++r_.documents;
    r_.sequences += static_cast<int64_t>(doc.size());
    for (const auto& s : doc) r_.tokens += static_cast<int64_t>(s.size());
    r_.bytes_in += static_cast<int64_t>(text.size());
    if (held_) held_->push_back(std::move(doc));
    else builder_.add_document(doc);
  }

 private:
  IndexedDatasetBuilder& builder_;
  const Tokenizer& tok_;
  bool eod_, sentences_;
  PreprocessResult& r_;
  std::vector<Document>* held_;  // shuffling: documents wait here, in input order
};

// An input is read whole (text) or to its end (jsonl): a device, a pipe or a socket (/dev/zero,
// /dev/stdin) could give bytes without end.
void check_regular_input(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return;  // the reader names a missing file
  MF_CHECK(std::filesystem::is_regular_file(st), "preprocess: ", path, " is not a regular file (",
           file_kind(st.type()), "); give a file of text or jsonl");
}

void read_jsonl(const std::string& path, const std::string& key, DocumentSink& sink) {
  const std::string where = "preprocess: " + path;
  for_each_jsonl_object(path, where, [&](int64_t line, const nlohmann::json& j) { sink.add(jsonl_string(j, key, where, line)); });
}

}  // namespace

std::vector<std::string> split_text_documents(const std::string& text, TextSplit mode, const std::string& separator) {
  std::vector<std::string> docs;
  if (mode == TextSplit::kWholeFile) {
    docs.push_back(text);
    return docs;
  }
  std::string cur;
  size_t i = 0;
  while (i < text.size()) {
    size_t nl = text.find('\n', i);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string_view line(text.data() + i, end - i);
    std::string_view body = line;
    if (!body.empty() && body.back() == '\n') body.remove_suffix(1);
    if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
    bool boundary = mode == TextSplit::kSeparatorLine ? body == separator : is_blank(body);
    if (boundary) {
      if (!is_blank(cur)) docs.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(line);
    }
    i = end;
  }
  if (!is_blank(cur)) docs.push_back(std::move(cur));
  return docs;
}

PreprocessResult preprocess(const std::vector<std::string>& inputs, const std::string& output_prefix,
                            const Tokenizer& tokenizer, const PreprocessOptions& options) {
  MF_CHECK(!inputs.empty(), "preprocess: no input files");
  MF_CHECK(!options.json_key.empty(), "preprocess: empty json_key");
  MF_CHECK(options.text_split != TextSplit::kSeparatorLine || !options.separator.empty(),
           "preprocess: empty separator line");
  for (const std::string& path : inputs) check_regular_input(path);
  PreprocessResult result;
  result.prefix = output_prefix + "_" + options.json_key + (options.split_sentences ? "_sentence" : "_document");
  IndexDType dtype = options.dtype.value_or(optimal_index_dtype(tokenizer.vocab_size()));
  IndexedDatasetBuilder builder(result.prefix, dtype);
  std::vector<Document> held;
  DocumentSink sink(builder, tokenizer, options.append_eod, options.split_sentences, result,
                    options.shuffle_seed ? &held : nullptr);
  for (const std::string& path : inputs) {
    InputFormat fmt = options.format;
    if (fmt == InputFormat::kAuto)
      fmt = path.ends_with(".jsonl") || path.ends_with(".json") ? InputFormat::kJsonl : InputFormat::kText;
    if (fmt == InputFormat::kJsonl) {
      read_jsonl(path, options.json_key, sink);
    } else {
      for (const std::string& doc : split_text_documents(read_file(path), options.text_split, options.separator))
        sink.add(doc);
    }
  }
  if (options.shuffle_seed) {
    std::vector<int64_t> order = random_permutation(static_cast<int64_t>(held.size()), *options.shuffle_seed, 0);
    for (int64_t i : order) builder.add_document(held[static_cast<size_t>(i)]);
  }
  if (result.documents == 0) {  // the builder's temporary files go with it: nothing is written
    std::string names;
    for (const std::string& path : inputs) names += (names.empty() ? "" : ", ") + path;
    MF_THROW("preprocess: ", names, " hold", inputs.size() == 1 ? "s" : "", " no documents (no text that tokenizes to at least one id, ",
             "under the json key \"", options.json_key, "\" for jsonl); nothing written");
  }
  builder.finalize();
  return result;
}

}  // namespace mf
