// BERT pre-training samples (see bert_dataset.h): the sentence mapping, then per sample the
// segment pair, truncation, and masked-LM predictions, all drawn from Philox.
#include "meshflow/data/bert_dataset.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/data/shuffle.h"
#include "meshflow/random/philox.h"

namespace mf {
namespace {

// The mapping's draws use their own key, so they never meet a sample's (seed, stream i) draws.
constexpr uint64_t kMappingKeyOffset = 0x9E3779B97F4A7C15ull;

// Sequential draws from one Philox (key, stream): block after block, two 64-bit values each.
class PhiloxStream {
 public:
  PhiloxStream(uint64_t key, uint64_t stream) : key_(key), stream_(stream) {}
  uint64_t next_u64() {
    if (half_ == 0) block_ = philox_block(key_, stream_, counter_++);
    uint64_t v = (static_cast<uint64_t>(block_.v[2 * half_]) << 32) | block_.v[2 * half_ + 1];
    half_ ^= 1;
    return v;
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  uint64_t below(uint64_t bound) { return next_u64() % bound; }  // bias < bound / 2^64

 private:
  uint64_t key_, stream_, counter_ = 0;
  Philox4x32 block_{};
  int half_ = 0;
};

}  // namespace

BertSpecialTokens bert_special_tokens(const Tokenizer& tok) {
  struct Names {
    const char *cls, *sep, *mask, *pad;
  };
  const Names kinds[] = {{"[CLS]", "[SEP]", "[MASK]", "[PAD]"}, {"<s>", "</s>", "<mask>", "<pad>"}};
  // The naming scheme whose [CLS] / <s> the vocabulary has decides which tokens must be there.
  const Names* names = &kinds[0];
  if (!tok.token_to_id(kinds[0].cls) && tok.token_to_id(kinds[1].cls)) names = &kinds[1];
  auto need = [&](const char* t) {
    std::optional<int32_t> id = tok.token_to_id(t);
    MF_CHECK(id.has_value(), "BERT special tokens: the ", tok.name(), " tokenizer has no ", t,
             " token (BERT needs [CLS] [SEP] [MASK] [PAD], or RoBERTa's <s> </s> <mask> <pad>)");
    return *id;
  };
  BertSpecialTokens s;
  s.cls = need(names->cls);
  s.sep = need(names->sep);
  s.mask = need(names->mask);
  s.pad = need(names->pad);
  s.vocab_size = tok.vocab_size();
  if (tok.name() == "wordpiece") {
    s.continues_word.assign(static_cast<size_t>(s.vocab_size), false);
    for (int32_t id = 0; id < static_cast<int32_t>(s.vocab_size); ++id) {
      std::string t = tok.id_to_token(id);
      s.continues_word[static_cast<size_t>(id)] = t.size() > 2 && t[0] == '#' && t[1] == '#';
    }
  }
  return s;
}

BertDataset::BertDataset(const IndexedDataset& data, const BertSpecialTokens& special, const BertDatasetOptions& o)
    : data_(data), special_(special), o_(o) {
  const std::string& name = data.prefix();
  const DocumentRange& r = o.documents;
  MF_CHECK(r.begin >= 0 && r.begin <= r.end && r.end <= data.num_documents(), "BertDataset ", name,
           ": document range [", r.begin, ", ", r.end, ") outside the dataset's ", data.num_documents(), " documents");
  const int64_t added = o.binary_head ? 3 : 2;
  max_num_tokens_ = o.seq_length - added;
  MF_CHECK(max_num_tokens_ >= 2, "BertDataset ", name, ": seq_length ", o.seq_length, " too small (at least ",
           added + 2, ": ", added, " special tokens and 2 of text)");
  MF_CHECK(o.seq_length <= INT32_MAX, "BertDataset ", name, ": seq_length ", o.seq_length, " too large");
  MF_CHECK(o.masked_lm_prob >= 0 && o.masked_lm_prob <= 1, "BertDataset ", name, ": masked_lm_prob ",
           o.masked_lm_prob, " outside [0, 1]");
  MF_CHECK(o.short_seq_prob >= 0 && o.short_seq_prob <= 1, "BertDataset ", name, ": short_seq_prob ",
           o.short_seq_prob, " outside [0, 1]");
  MF_CHECK(special.vocab_size > 0, "BertDataset ", name, ": vocab_size ", special.vocab_size, " (must be > 0)");
  using Named = std::pair<const char*, int32_t>;
  for (auto [tname, id] : {Named{"[CLS]", special.cls}, Named{"[SEP]", special.sep}, Named{"[MASK]", special.mask},
                           Named{"[PAD]", special.pad}})
    MF_CHECK(id >= 0 && id < special.vocab_size, "BertDataset ", name, ": special token ", tname, " id ", id,
             " outside the vocabulary [0, ", special.vocab_size, ")");

  // Documents that can give samples.
  const std::vector<int64_t>& doc_idx = data.document_indices();
  const std::vector<int32_t>& sizes = data.sequence_lengths();
  const int64_t min_sent = o.binary_head ? 2 : 1;
  std::vector<int64_t> usable;
  for (int64_t d = r.begin; d < r.end; ++d) {
    int64_t first = doc_idx[static_cast<size_t>(d)], last = doc_idx[static_cast<size_t>(d) + 1];
    if (last - first < min_sent) continue;
    bool long_sentence = false;
    for (int64_t s = first; s < last && !long_sentence; ++s)
      long_sentence = o.long_sentence_len > 0 && sizes[static_cast<size_t>(s)] > o.long_sentence_len;
    if (!long_sentence) usable.push_back(d);
  }
  documents_used_ = static_cast<int64_t>(usable.size());
  MF_CHECK(!usable.empty(), "BertDataset ", name, ": no document in [", r.begin, ", ", r.end, ") has ",
           o.binary_head ? "2 or more sentences" : "a sentence",
           o.long_sentence_len > 0 ? " and none longer than " + std::to_string(o.long_sentence_len) + " tokens" : "",
           o.binary_head ? " (the next-sentence head needs sentence pairs: preprocess with --split-sentences)" : "");

  // helpers.cpp build_mapping: one target length drawn per sample, sequentially, over all epochs.
  const uint64_t key = o.seed + kMappingKeyOffset;
  PhiloxStream draws(key, 0);
  const uint64_t short_ratio = o.short_seq_prob > 0 ? static_cast<uint64_t>(std::llround(1.0 / o.short_seq_prob)) : 0;
  auto target_length = [&]() -> int32_t {
    if (short_ratio == 0) return static_cast<int32_t>(max_num_tokens_);
    uint64_t x = draws.next_u64();
    if (x % short_ratio == 0) return static_cast<int32_t>(2 + (x >> 32) % static_cast<uint64_t>(max_num_tokens_ - 1));
    return static_cast<int32_t>(max_num_tokens_);
  };
  do {
    for (int64_t d : usable) {
      int64_t first = doc_idx[static_cast<size_t>(d)], last = doc_idx[static_cast<size_t>(d) + 1];
      int64_t start = first, len = 0, num_sent = 0;
      int32_t target = target_length();
      for (int64_t s = first; s < last; ++s) {
        len += sizes[static_cast<size_t>(s)];
        ++num_sent;
        int64_t remaining = last - s - 1;
        if ((len >= target && remaining > 1 && num_sent >= min_sent) || remaining == 0) {
          mapping_.push_back({start, s + 1, target});
          start = s + 1;
          len = num_sent = 0;
          if (remaining > 0) target = target_length();
        }
      }
    }
    if (++num_epochs_ == 1) samples_per_epoch_ = static_cast<int64_t>(mapping_.size());
  } while (o.num_samples > 0 && static_cast<int64_t>(mapping_.size()) < o.num_samples);

  std::vector<int64_t> perm = random_permutation(static_cast<int64_t>(mapping_.size()), key, 1);
  std::vector<Entry> shuffled(mapping_.size());
  for (size_t k = 0; k < perm.size(); ++k) shuffled[k] = mapping_[static_cast<size_t>(perm[k])];
  mapping_ = std::move(shuffled);
  num_samples_ = o.num_samples > 0 ? static_cast<size_t>(o.num_samples) : mapping_.size();
  mapping_.resize(num_samples_);
  mapping_.shrink_to_fit();
}

const BertDataset::Entry& BertDataset::entry(int64_t i) const {
  MF_CHECK(i >= 0 && i < size(), "BertDataset ", data_.prefix(), ": sample ", i, " outside [0, ", size(), ")");
  return mapping_[static_cast<size_t>(i)];
}

BertSample BertDataset::sample(int64_t i) const {
  BertSample s;
  sample_into(i, s);
  return s;
}

void BertDataset::sample_into(int64_t i, BertSample& out) const {
  const Entry& e = entry(i);
  PhiloxStream rng(o_.seed, static_cast<uint64_t>(i));
  const int64_t n = e.end - e.first;

  // Segments A and B (bert_dataset.py get_a_and_b_segments).
  std::vector<int32_t> a, b;
  bool is_random = false;
  if (o_.binary_head) {
    int64_t a_end = n >= 3 ? 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - 1))) : 1;
    for (int64_t s = e.first; s < e.first + a_end; ++s) data_.read(s, 0, -1, a);
    for (int64_t s = e.first + a_end; s < e.end; ++s) data_.read(s, 0, -1, b);
    if (rng.uniform() < 0.5) {
      is_random = true;
      std::swap(a, b);
    }
  } else {
    for (int64_t s = e.first; s < e.end; ++s) data_.read(s, 0, -1, a);
  }

  // Truncation (dataset_utils.py truncate_segments): one token at a time off the longer segment,
  // from its front or its back.
  size_t a_lo = 0, a_hi = a.size(), b_lo = 0, b_hi = b.size();
  while ((a_hi - a_lo) + (b_hi - b_lo) > static_cast<size_t>(e.target)) {
    bool trim_a = (a_hi - a_lo) > (b_hi - b_lo);
    size_t& lo = trim_a ? a_lo : b_lo;
    size_t& hi = trim_a ? a_hi : b_hi;
    if (rng.uniform() < 0.5) ++lo;
    else --hi;
  }

  // [CLS] A [SEP] B [SEP] with token types 0 ... 0 1 ... 1.
  const size_t L = static_cast<size_t>(o_.seq_length);
  out.input_ids.assign(L, special_.pad);
  out.token_type_ids.assign(L, 0);
  out.attention_mask.assign(L, 0);
  out.labels.assign(L, kIgnoreLabel);
  out.next_sentence_label = is_random ? 1 : 0;
  size_t t = 0;
  out.input_ids[t++] = special_.cls;
  for (size_t k = a_lo; k < a_hi; ++k) out.input_ids[t++] = a[k];
  out.input_ids[t++] = special_.sep;
  if (b_hi > b_lo) {
    size_t b_start = t;
    for (size_t k = b_lo; k < b_hi; ++k) out.input_ids[t++] = b[k];
    out.input_ids[t++] = special_.sep;
    std::fill(out.token_type_ids.begin() + static_cast<std::ptrdiff_t>(b_start),
              out.token_type_ids.begin() + static_cast<std::ptrdiff_t>(t), 1);
  }
  const size_t num_tokens = t;
  std::fill(out.attention_mask.begin(), out.attention_mask.begin() + static_cast<std::ptrdiff_t>(num_tokens), 1);

  // Masked-LM predictions (dataset_utils.py create_masked_lm_predictions). Megatron compares
  // counts with the float max_predictions = masked_lm_prob * target: at most its floor.
  if (o_.masked_lm_prob <= 0) return;
  const int64_t by_length =
      std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(o_.masked_lm_prob * static_cast<double>(num_tokens))));
  const int64_t budget =
      std::min(static_cast<int64_t>(std::floor(o_.masked_lm_prob * static_cast<double>(e.target))), by_length);
  auto is_special = [&](int64_t id) { return id == special_.cls || id == special_.sep; };
  auto continues = [&](int64_t id) {
    return o_.whole_word_masking && id >= 0 && static_cast<size_t>(id) < special_.continues_word.size() &&
           special_.continues_word[static_cast<size_t>(id)];
  };
  struct Word {
    uint32_t start, len;
  };
  std::vector<Word> words;
  for (size_t k = 0; k < num_tokens; ++k) {
    int64_t id = out.input_ids[k];
    if (is_special(id)) continue;
    // A continuation joins the word before it, unless [CLS] / [SEP] stands between them.
    if (continues(id) && !words.empty() && words.back().start + words.back().len == k) ++words.back().len;
    else words.push_back({static_cast<uint32_t>(k), 1});
  }
  for (size_t k = words.size(); k > 1; --k) std::swap(words[k - 1], words[rng.below(k)]);
  int64_t masked = 0;
  for (const Word& w : words) {
    if (masked >= budget) break;
    if (masked + w.len > budget) continue;
    for (uint32_t k = w.start; k < w.start + w.len; ++k) {
      int64_t original = out.input_ids[k];
      out.labels[k] = original;
      if (rng.uniform() < 0.8) out.input_ids[k] = special_.mask;
      else if (rng.uniform() >= 0.5) out.input_ids[k] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(special_.vocab_size)));
    }
    masked += w.len;
  }
}

}  // namespace mf
