// GPT-2 byte-level BPE: vocabulary loading, merges, encode with a per-piece cache, decode.
#include "meshflow/data/gpt2_bpe.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "meshflow/core/error.h"
#include "meshflow/core/regular_file.h"
#include "meshflow/data/gpt2_pretokenize.h"

namespace mf {
namespace {

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_path, const std::string& merges_path)
    : cache_(std::make_unique<bpe::PieceCache>()) {
  // Vocabulary: {"token": id, ...} with ids 0..V-1, each once.
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_regular_file(vocab_path, "GPT-2 vocabulary", kMaxTokenizerFileBytes));
  } catch (const nlohmann::json::exception& e) {
    MF_THROW("GPT-2 vocabulary ", vocab_path, ": not valid JSON (", e.what(), ")");
  }
  MF_CHECK(vocab.is_object() && !vocab.empty(), "GPT-2 vocabulary ", vocab_path,
           ": expected a non-empty JSON object of token -> id");
  id_to_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  std::unordered_map<std::string, int32_t, SvHash, std::equal_to<>> bytes_to_id;
  bytes_to_id.reserve(vocab.size());
  std::string bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    MF_CHECK(it->is_number_integer(), "GPT-2 vocabulary ", vocab_path, ": id of token '", it.key(),
             "' is not an integer");
    int64_t id = it->get<int64_t>();
    MF_CHECK(id >= 0 && id < static_cast<int64_t>(vocab.size()) && !seen[id], "GPT-2 vocabulary ", vocab_path,
             ": id ", id, " of token '", it.key(), "' is out of range or repeated (", vocab.size(), " tokens)");
    MF_CHECK(bpe::unicode_to_bytes(it.key(), bytes), "GPT-2 vocabulary ", vocab_path, ": token '", it.key(),
             "' has characters outside GPT-2's byte alphabet");
    seen[id] = true;
    id_to_bytes_[id] = bytes;
    bytes_to_id.emplace(bytes, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    MF_CHECK(it != bytes_to_id.end(), "GPT-2 vocabulary ", vocab_path, ": no token for byte ", b);
    byte_id_[b] = it->second;
  }
  auto eod = bytes_to_id.find(std::string_view("<|endoftext|>"));
  MF_CHECK(eod != bytes_to_id.end(), "GPT-2 vocabulary ", vocab_path, ": no <|endoftext|> token");
  eod_id_ = eod->second;

  // Merges: "a b" per line, rank = order; an optional leading "#version" line.
  std::istringstream in(read_regular_file(merges_path, "GPT-2 merges", kMaxTokenizerFileBytes));
  std::string line, left, right;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    MF_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
             "GPT-2 merges ", merges_path, ":", lineno, ": expected two tokens separated by one space, got '",
             line, "'");
    bool ok = bpe::unicode_to_bytes(std::string_view(line).substr(0, sp), left) &&
              bpe::unicode_to_bytes(std::string_view(line).substr(sp + 1), right);
    auto a = bytes_to_id.find(left), b = bytes_to_id.find(right), ab = bytes_to_id.find(left + right);
    MF_CHECK(ok && a != bytes_to_id.end() && b != bytes_to_id.end() && ab != bytes_to_id.end(), "GPT-2 merges ",
             merges_path, ":", lineno, ": merge '", line, "' uses or makes a token missing from ", vocab_path);
    merges_.add(a->second, b->second, ab->second);
  }
  MF_CHECK(merges_.num_merges() > 0, "GPT-2 merges ", merges_path, ": no merges");
}

Gpt2BpeTokenizer Gpt2BpeTokenizer::from_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  if (fs::exists(d / "vocab.json") || fs::exists(d / "merges.txt"))
    return Gpt2BpeTokenizer((d / "vocab.json").string(), (d / "merges.txt").string());
  if (fs::exists(d / "encoder.json") || fs::exists(d / "vocab.bpe"))
    return Gpt2BpeTokenizer((d / "encoder.json").string(), (d / "vocab.bpe").string());
  MF_THROW("GPT-2 tokenizer: ", dir, " holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe");
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer& Gpt2BpeTokenizer::operator=(Gpt2BpeTokenizer&&) noexcept = default;
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::vector<int32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  std::vector<std::string_view> pieces;
  gpt2_pretokenize(text, pieces);
  std::vector<int32_t> word;
  for (std::string_view p : pieces) {
    if (cache_->append(p, ids)) continue;
    word.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) word[i] = byte_id_[static_cast<unsigned char>(p[i])];
    merges_.apply(word);
    ids.insert(ids.end(), word.begin(), word.end());
    cache_->store(p, word);
  }
  return ids;
}

const std::string& Gpt2BpeTokenizer::token_bytes(int32_t id) const {
  MF_CHECK(id >= 0 && id < static_cast<int32_t>(id_to_bytes_.size()), "Gpt2BpeTokenizer: id ", id,
           " outside [0, ", id_to_bytes_.size(), ")");
  return id_to_bytes_[id];
}

std::string Gpt2BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::optional<int32_t> Gpt2BpeTokenizer::token_to_id(std::string_view token) const {
  // A linear scan: lookups are rare (special tokens), and a map would double the memory.
  std::string bytes;
  if (!bpe::unicode_to_bytes(token, bytes)) return std::nullopt;
  for (size_t i = id_to_bytes_.size(); i-- > 0;)
    if (id_to_bytes_[i] == bytes) return static_cast<int32_t>(i);
  return std::nullopt;
}

std::string Gpt2BpeTokenizer::id_to_token(int32_t id) const {
  std::string out;
  for (char b : token_bytes(id)) out += bpe::byte_to_unicode()[static_cast<unsigned char>(b)];
  return out;
}

}  // namespace mf
