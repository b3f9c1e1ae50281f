// BERT pre-training samples (see bert_dataset.h): the sentence mapping, then per sample the
// segment pair, truncation, and masked-LM predictions, all drawn from Philox.
#include "meshflow/data/bert_dataset.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "meshflow/core/error.h"

namespace mf {
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
  const std::string name = "BertDataset " + data.prefix();
  const int64_t added = o.binary_head ? 3 : 2;
  max_num_tokens_ = o.seq_length - added;
  MF_CHECK(max_num_tokens_ >= 2, name, ": seq_length ", o.seq_length, " too small (at least ", added + 2, ": ", added,
           " special tokens and 2 of text)");
  MF_CHECK(o.seq_length <= INT32_MAX, name, ": seq_length ", o.seq_length, " too large");
  MF_CHECK(o.masked_lm_prob >= 0 && o.masked_lm_prob <= 1, name, ": masked_lm_prob ", o.masked_lm_prob,
           " outside [0, 1]");
  MF_CHECK(special.vocab_size > 0, name, ": vocab_size ", special.vocab_size, " (must be > 0)");
  using Named = std::pair<const char*, int32_t>;
  for (auto [tname, id] : {Named{"[CLS]", special.cls}, Named{"[SEP]", special.sep}, Named{"[MASK]", special.mask},
                           Named{"[PAD]", special.pad}})
    MF_CHECK(id >= 0 && id < special.vocab_size, name, ": special token ", tname, " id ", id,
             " outside the vocabulary [0, ", special.vocab_size, ")");

  SentenceMappingOptions mo;
  mo.documents = o.documents;
  mo.max_num_tokens = max_num_tokens_;
  mo.short_seq_prob = o.short_seq_prob;
  mo.seed = o.seed;
  mo.num_samples = o.num_samples;
  mo.min_sentences = o.binary_head ? 2 : 1;
  mo.long_sentence_len = o.long_sentence_len;
  SentenceMapping m = build_sentence_mapping(
      data, mo, name,
      o.binary_head ? " (the next-sentence head needs sentence pairs: preprocess with --split-sentences)" : "");
  mapping_ = std::move(m.entries);
  documents_used_ = m.documents_used;
  num_epochs_ = m.num_epochs;
  samples_per_epoch_ = m.samples_per_epoch;
  num_samples_ = mapping_.size();
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
