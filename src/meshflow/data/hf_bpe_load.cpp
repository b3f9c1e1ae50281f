// HfBpeTokenizer::from_file: reads tokenizer.json (and tokenizer_config.json beside it for the
// end-of-document default), checking each field against what hf_bpe.h supports.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"
#include "meshflow/core/regular_file.h"
#include "meshflow/data/hf_bpe.h"
#include "meshflow/data/llama3_pretokenize.h"

namespace mf {

using nlohmann::json;

struct HfBpeTokenizer::Loader {
  const std::string& path;
  HfBpeTokenizer& tok;
  std::unordered_map<std::string, int32_t> spelled_to_id;  // vocabulary, in the byte alphabet
  std::vector<bool> has_token;                             // by id
  // Ids run from 0 without gaps over the vocabulary and the added tokens: none is as large as
  // their count (so that a stray large id cannot ask for gigabytes of empty slots).
  int64_t id_limit = 0;

  template <class... Args>
  void check(bool cond, const Args&... parts) const {
    if (!cond) MF_THROW("tokenizer ", path, ": ", parts...);
  }
  // The string at `key` of object `j`, or "" when absent or null.
  std::string str(const json& j, const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "";
    check(it->is_string(), "'", key, "' is not a string");
    return it->get<std::string>();
  }
  bool flag(const json& j, const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return false;
    check(it->is_boolean(), "'", key, "' is not true or false");
    return it->get<bool>();
  }

  void model(const json& m);
  void vocab(const json& v);
  void fallback_bytes();
  void merges(const json& list);
  void normalizer(const json& n);
  void pre_tokenizer(const json& p);
  void added_tokens(const json& list);
  void fill_ids();
  void choose_eod(const std::string& eod_token);
};

void HfBpeTokenizer::Loader::model(const json& m) {
  check(m.is_object() && str(m, "type") == "BPE", "model.type is not \"BPE\" (only BPE is supported)");
  check(!m.contains("dropout") || m["dropout"].is_null() || m["dropout"] == 0, "model.dropout is not supported");
  check(str(m, "continuing_subword_prefix").empty() && str(m, "end_of_word_suffix").empty(),
        "model.continuing_subword_prefix / end_of_word_suffix are not supported");
  tok.byte_fallback_ = flag(m, "byte_fallback");
  tok.ignore_merges_ = flag(m, "ignore_merges");
  check(m.contains("vocab") && m.contains("merges"), "model has no vocab or no merges");
  vocab(m["vocab"]);
  merges(m["merges"]);
}

void HfBpeTokenizer::Loader::vocab(const json& v) {
  check(v.is_object() && !v.empty(), "model.vocab is not a non-empty object of token -> id");
  std::string bytes;
  for (auto it = v.begin(); it != v.end(); ++it) {
    check(it->is_number_integer(), "model.vocab: the id of '", it.key(), "' is not an integer");
    int64_t id = it->get<int64_t>();
    check(id >= 0 && id < (int64_t{1} << 30) && id < id_limit, "model.vocab: id ", id, " of '", it.key(),
          "' is out of range (", id_limit, " tokens with the added ones)");
    if (tok.byte_fallback_)
      bytes = it.key();  // spelled as text
    else
      check(bpe::unicode_to_bytes(it.key(), bytes), "model.vocab: token '", it.key(),
            "' has characters outside the byte-level alphabet (not a byte-level BPE; a SentencePiece-style "
            "one has model.byte_fallback true)");
    size_t slot = static_cast<size_t>(id);
    if (slot >= tok.id_to_bytes_.size()) {
      tok.id_to_bytes_.resize(slot + 1);
      has_token.resize(slot + 1, false);
    }
    check(!has_token[slot], "model.vocab: id ", id, " is given to two tokens");
    has_token[slot] = true;
    spelled_to_id.emplace(it.key(), static_cast<int32_t>(id));
    tok.id_to_bytes_[slot] = bytes;
    tok.bytes_to_id_.emplace(bytes, static_cast<int32_t>(id));
  }
  if (tok.byte_fallback_) return fallback_bytes();
  for (int b = 0; b < 256; ++b) {
    auto it = spelled_to_id.find(bpe::byte_to_unicode()[b]);
    check(it != spelled_to_id.end(), "model.vocab has no token for byte ", b);
    tok.byte_id_[b] = it->second;
  }
}

// Byte fallback's tokens <0x00>..<0xFF> (upper-case hex, as Hugging Face writes them).
void HfBpeTokenizer::Loader::fallback_bytes() {
  tok.fallback_byte_.assign(tok.id_to_bytes_.size(), -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = spelled_to_id.find(name);
    check(it != spelled_to_id.end(), "model.byte_fallback is true but model.vocab has no token ", name);
    tok.byte_id_[b] = it->second;
    tok.fallback_byte_[static_cast<size_t>(it->second)] = static_cast<int16_t>(b);
  }
}

void HfBpeTokenizer::Loader::merges(const json& list) {
  check(list.is_array() && !list.empty(), "model.merges is not a non-empty array");
  std::string left, right;
  for (size_t k = 0; k < list.size(); ++k) {
    const json& m = list[k];
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      check(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos,
            "model.merges[", k, "]: expected two tokens separated by one space, got '", s, "'");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else {  // ["a", "b"]
      check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), "model.merges[", k,
            "]: expected \"a b\" or [\"a\", \"b\"]");
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    auto a = spelled_to_id.find(left), b = spelled_to_id.find(right), ab = spelled_to_id.find(left + right);
    check(a != spelled_to_id.end() && b != spelled_to_id.end() && ab != spelled_to_id.end(), "model.merges[", k,
          "]: '", left, "' + '", right, "' uses or makes a token missing from model.vocab");
    tok.merges_.add(a->second, b->second, ab->second);
  }
}

namespace {

// Whether object `o` has `key` equal to `want` (no exception for other types).
bool field_is(const json& o, const char* key, const json& want) {
  return o.is_object() && o.contains(key) && o[key] == want;
}

// Llama 2's normaliser: Sequence[Prepend("▁"), Replace(String " " -> "▁")] (either order).
bool is_metaspace_normalizer(const json& n) {
  const std::string metaspace = "\u2581";
  auto prepend = [&](const json& p) { return field_is(p, "type", "Prepend") && field_is(p, "prepend", metaspace); };
  auto replace = [&](const json& r) {
    return field_is(r, "type", "Replace") && field_is(r, "pattern", json{{"String", " "}}) &&
           field_is(r, "content", metaspace);
  };
  if (!field_is(n, "type", "Sequence") || !n.contains("normalizers")) return false;
  const json& s = n["normalizers"];
  return s.is_array() && s.size() == 2 && ((prepend(s[0]) && replace(s[1])) || (replace(s[0]) && prepend(s[1])));
}

// Llama 2's decoder: Sequence[Replace(String "▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0)].
bool is_byte_fallback_decoder(const json& d) {
  if (!field_is(d, "type", "Sequence") || !d.contains("decoders")) return false;
  const json& s = d["decoders"];
  return s.is_array() && s.size() == 4 && field_is(s[0], "type", "Replace") &&
         field_is(s[0], "pattern", json{{"String", "\u2581"}}) && field_is(s[0], "content", " ") &&
         field_is(s[1], "type", "ByteFallback") && field_is(s[2], "type", "Fuse") && field_is(s[3], "type", "Strip") &&
         field_is(s[3], "content", " ") && field_is(s[3], "start", 1) && field_is(s[3], "stop", 0);
}

}  // namespace

void HfBpeTokenizer::Loader::normalizer(const json& n) {
  if (tok.byte_fallback_) {
    check(is_metaspace_normalizer(n), "normalizer ", n.dump().substr(0, 80), " is not supported with "
          "model.byte_fallback (Llama 2's Sequence[Prepend(\"\u2581\"), Replace(\" \" -> \"\u2581\")])");
    return;
  }
  if (n.is_null()) return;
  check(n.is_object() && str(n, "type") == "NFC", "normalizer ", n.dump().substr(0, 80),
        " is not supported (none or NFC)");
  tok.nfc_ = true;
}

void HfBpeTokenizer::Loader::pre_tokenizer(const json& p) {
  if (tok.byte_fallback_) {
    check(p.is_null(), "pre_tokenizer ", p.dump().substr(0, 80),
          " is not supported with model.byte_fallback (Llama 2's tokenizer.json has none)");
    return;
  }
  check(p.is_object(), "pre_tokenizer is missing (a byte-level BPE needs ByteLevel)");
  auto byte_level = [&](const json& b, bool use_regex) {
    return b.is_object() && str(b, "type") == "ByteLevel" && !flag(b, "add_prefix_space") &&
           (b.contains("use_regex") ? flag(b, "use_regex") : true) == use_regex;  // Hugging Face's default: true
  };
  if (str(p, "type") == "ByteLevel") {
    check(byte_level(p, true), "pre_tokenizer ByteLevel: add_prefix_space must be false and use_regex true");
    tok.max_number_run_ = 0;  // GPT-2's regex
    return;
  }
  check(str(p, "type") == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array() &&
            p["pretokenizers"].size() == 2,
        "pre_tokenizer is neither ByteLevel nor Sequence[Split, ByteLevel]");
  const json& split = p["pretokenizers"][0];
  check(split.is_object() && str(split, "type") == "Split" && str(split, "behavior") == "Isolated" &&
            !flag(split, "invert") && split.contains("pattern") && split["pattern"].is_object(),
        "pre_tokenizer: the first of the Sequence is not Split(Regex, Isolated)");
  std::string regex = str(split["pattern"], "Regex");
  std::optional<int> run = llama3_pattern_number_run(regex);
  check(run.has_value(), "pre_tokenizer: Split regex '", regex, "' is not Llama 3's or Qwen2's");
  tok.max_number_run_ = *run;
  check(byte_level(p["pretokenizers"][1], false),
        "pre_tokenizer: the second of the Sequence is not ByteLevel(add_prefix_space false, use_regex false)");
}

void HfBpeTokenizer::Loader::added_tokens(const json& list) {
  if (list.is_null()) return;
  check(list.is_array(), "added_tokens is not an array");
  for (const json& t : list) {
    check(t.is_object() && t.contains("id") && t["id"].is_number_integer() && !str(t, "content").empty(),
          "added_tokens: an entry without an integer id or a content");
    std::string content = str(t, "content");
    check(!flag(t, "lstrip") && !flag(t, "rstrip") && !flag(t, "single_word"), "added token '", content,
          "': lstrip, rstrip and single_word are not supported");
    check(!((tok.nfc_ || tok.byte_fallback_) && flag(t, "normalized")), "added token '", content,
          "': normalized added tokens are not supported with a normalizer");
    int64_t id = t["id"].get<int64_t>();
    check(id >= 0 && id < (int64_t{1} << 30) && id < id_limit, "added token '", content, "': id ", id,
          " is out of range (", id_limit, " tokens with the vocabulary)");
    size_t slot = static_cast<size_t>(id);
    if (slot >= tok.id_to_bytes_.size()) {
      tok.id_to_bytes_.resize(slot + 1);
      has_token.resize(slot + 1, false);
    }
    has_token[slot] = true;  // an added token may also be in the vocabulary (GPT-2's <|endoftext|>)
    tok.id_to_bytes_[slot] = content;
    tok.added_.push_back({content, static_cast<int32_t>(id)});
  }
  std::vector<int32_t> order(tok.added_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int32_t>(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return tok.added_[a].text.size() > tok.added_[b].text.size(); });
  for (int32_t k : order)
    tok.added_by_first_byte_[static_cast<unsigned char>(tok.added_[k].text[0])].push_back(k);
}

void HfBpeTokenizer::Loader::fill_ids() {
  auto gap = std::find(has_token.begin(), has_token.end(), false);
  check(gap == has_token.end(), "id ", gap - has_token.begin(), " has no token (ids must run from 0 to ",
        has_token.size() - 1, ")");
  if (tok.byte_fallback_) tok.fallback_byte_.resize(tok.id_to_bytes_.size(), -1);  // added tokens past the vocabulary
}

void HfBpeTokenizer::Loader::choose_eod(const std::string& eod_token) {
  std::string name = eod_token, source = "tokenization.eod_token";
  for (const char* guess : {"<|end_of_text|>", "<|endoftext|>", tok.byte_fallback_ ? "</s>" : ""})
    if (name.empty() && *guess && tok.token_id(guess) >= 0) {
      name = guess;
      source = "the default";
    }
  auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (name.empty() && std::filesystem::exists(config_path)) {
    source = config_path.string() + "'s eos_token";
    json c = json::parse(read_regular_file(config_path.string(), "tokenizer_config.json", kMaxTokenizerFileBytes), nullptr, /*allow_exceptions=*/false);
    const json* eos = c.is_object() && c.contains("eos_token") ? &c["eos_token"] : nullptr;
    if (eos && eos->is_object() && eos->contains("content")) eos = &(*eos)["content"];
    if (eos && eos->is_string()) name = eos->get<std::string>();
  }
  check(!name.empty(), "no end-of-document token (no <|end_of_text|> or <|endoftext|>, no eos_token in a "
        "tokenizer_config.json beside it): set tokenization.eod_token");
  tok.eod_id_ = tok.token_id(name);
  check(tok.eod_id_ >= 0, "the end-of-document token '", name, "' (", source, ") is not a token");
}

HfBpeTokenizer HfBpeTokenizer::from_file(const std::string& path, const std::string& eod_token) {
  json j;
  try {
    j = json::parse(read_regular_file(path, "tokenizer.json", kMaxTokenizerFileBytes));
  } catch (const json::exception& e) {
    MF_THROW("tokenizer ", path, ": not valid JSON (", e.what(), ")");
  }
  HfBpeTokenizer tok;
  Loader l{path, tok, {}, {}};
  l.check(j.is_object() && j.contains("model"), "no 'model' (not a Hugging Face tokenizer.json)");
  const json& m = j["model"];
  l.id_limit = static_cast<int64_t>((m.is_object() && m.contains("vocab") ? m["vocab"].size() : 0) +
                                    (j.contains("added_tokens") ? j["added_tokens"].size() : 0));
  l.model(j["model"]);
  l.normalizer(j.value("normalizer", json()));
  l.pre_tokenizer(j.value("pre_tokenizer", json()));
  const json decoder = j.value("decoder", json());
  if (tok.byte_fallback_)
    l.check(is_byte_fallback_decoder(decoder), "decoder is not Llama 2's Sequence[Replace(\"\u2581\" -> \" \"), "
            "ByteFallback, Fuse, Strip(\" \", 1, 0)] (needed with model.byte_fallback)");
  else
    l.check(decoder.is_null() || (decoder.is_object() && l.str(decoder, "type") == "ByteLevel"),
            "decoder is not ByteLevel");
  l.added_tokens(j.value("added_tokens", json()));
  l.fill_ids();
  l.choose_eod(eod_token);
  return tok;
}

}  // namespace mf
