// ByteTokenizer and the tokenizer factory.
#include "meshflow/data/tokenizer.h"

#include <filesystem>

#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_bpe.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/sentencepiece.h"
#include "meshflow/data/wordpiece.h"

namespace mf {
namespace {

// `path` itself, or `path`/`file_name` when `path` is a folder, else `path`/`other_name` if given.
std::string tokenizer_file(const std::string& kind, const std::string& path, const char* file_name,
                           const char* other_name = nullptr) {
  const std::string names = other_name ? std::string(file_name) + " or " + other_name : std::string(file_name);
  MF_CHECK(!path.empty(), "make_tokenizer: '", kind, "' needs a ", names, " file or a folder holding one");
  std::filesystem::path p(path);
  if (!std::filesystem::is_directory(p)) return path;
  if (std::filesystem::exists(p / file_name)) return (p / file_name).string();
  MF_CHECK(other_name && std::filesystem::exists(p / other_name), "tokenizer folder ", path, " holds no ", names);
  return (p / other_name).string();
}

}  // namespace

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    MF_CHECK(id >= 0 && id <= kEod, "ByteTokenizer::decode: id ", id, " outside [0, 256]");
    if (id == kEod)
      out += "<|endoftext|>";
    else
      out.push_back(static_cast<char>(id));
  }
  return out;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& path,
                                          const std::string& eod_token, bool lower_case, int64_t extra_ids) {
  MF_CHECK(extra_ids == 0 || kind == "sentencepiece", "make_tokenizer: extra_ids (", extra_ids,
           ", T5's sentinel tokens) is for the sentencepiece tokenizer only, not '", kind, "'");
  if (kind == "byte") return std::make_unique<ByteTokenizer>();
  if (kind == "gpt2" || kind == "gpt2-bpe" || kind == "gpt2_bpe") {
    MF_CHECK(!path.empty(), "make_tokenizer: '", kind, "' needs a vocabulary directory");
    return std::make_unique<Gpt2BpeTokenizer>(Gpt2BpeTokenizer::from_directory(path));
  }
  if (kind == "hf_bpe")
    return std::make_unique<HfBpeTokenizer>(
        HfBpeTokenizer::from_file(tokenizer_file(kind, path, "tokenizer.json"), eod_token));
  if (kind == "sentencepiece")
    return std::make_unique<SentencePieceTokenizer>(
        SentencePieceTokenizer::from_file(tokenizer_file(kind, path, "tokenizer.model", "spiece.model"), eod_token,
                                          extra_ids));
  if (kind == "wordpiece")
    return std::make_unique<WordPieceTokenizer>(
        WordPieceTokenizer::from_file(tokenizer_file(kind, path, "vocab.txt"), lower_case, eod_token));
  MF_THROW("make_tokenizer: unknown tokenizer '", kind, "' (expected byte, gpt2_bpe, hf_bpe, sentencepiece, wordpiece)");
}

}  // namespace mf
