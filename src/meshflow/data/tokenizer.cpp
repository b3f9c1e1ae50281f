// ByteTokenizer and the tokenizer factory.
#include "meshflow/data/tokenizer.h"

#include "meshflow/core/error.h"
#include "meshflow/data/gpt2_bpe.h"

namespace mf {

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

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_dir) {
  if (kind == "byte") return std::make_unique<ByteTokenizer>();
  if (kind == "gpt2" || kind == "gpt2-bpe") {
    MF_CHECK(!vocab_dir.empty(), "make_tokenizer: '", kind, "' needs a vocabulary directory");
    return std::make_unique<Gpt2BpeTokenizer>(Gpt2BpeTokenizer::from_directory(vocab_dir));
  }
  MF_THROW("make_tokenizer: unknown tokenizer '", kind, "' (expected byte, gpt2)");
}

}  // namespace mf
