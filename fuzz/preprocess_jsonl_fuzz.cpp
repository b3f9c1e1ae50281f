// `meshflow preprocess` input: jsonl documents (the input is the file), each document's "text"
// split into sentences (--split-sentences) and the file as plain text split into documents.
#include <cstdint>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"
#include "meshflow/data/jsonl.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/data/sentence_split.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::istringstream in(text);
    mf::for_each_jsonl_object(in, "fuzz.jsonl", [](int64_t line, const nlohmann::json& j) {
      const std::string& doc = mf::jsonl_string(j, "text", "fuzz.jsonl", line);
      for (const std::string& s : mf::split_sentences(doc))
        if (s.size() > doc.size()) __builtin_trap();
    });
  } catch (const mf::Error&) {
  }
  (void)mf::split_text_documents(text, mf::TextSplit::kSeparatorLine, "%");
  (void)mf::split_text_documents(text, mf::TextSplit::kBlankLine, "");
  return 0;
}
