// Megatron's sample mapping over sentence-split documents (see sentence_mapping.h).
#include "meshflow/data/sentence_mapping.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/core/host_memory.h"
#include "meshflow/data/shuffle.h"

namespace mf {
namespace {
// The mapping's draws use their own key, so they never meet a sample's (seed, stream i) draws.
constexpr uint64_t kMappingKeyOffset = 0x9E3779B97F4A7C15ull;
}  // namespace

SentenceMapping build_sentence_mapping(const IndexedDataset& data, const SentenceMappingOptions& o,
                                       const std::string& who, const std::string& hint) {
  const DocumentRange& r = o.documents;
  MF_CHECK(r.begin >= 0 && r.begin <= r.end && r.end <= data.num_documents(), who, ": document range [", r.begin,
           ", ", r.end, ") outside the dataset's ", data.num_documents(), " documents");
  MF_CHECK(o.max_num_tokens >= 2 && o.max_num_tokens <= INT32_MAX, who, ": max_num_tokens ", o.max_num_tokens,
           " outside [2, 2^31)");
  MF_CHECK(o.short_seq_prob >= 0 && o.short_seq_prob <= 1, who, ": short_seq_prob ", o.short_seq_prob,
           " outside [0, 1]");
  const int64_t min_sent = std::max<int64_t>(1, o.min_sentences);

  // Documents that can give samples.
  const std::vector<int64_t>& doc_idx = data.document_indices();
  const std::vector<int32_t>& sizes = data.sequence_lengths();
  std::vector<int64_t> usable;
  for (int64_t d = r.begin; d < r.end; ++d) {
    int64_t first = doc_idx[static_cast<size_t>(d)], last = doc_idx[static_cast<size_t>(d) + 1];
    if (last - first < min_sent) continue;
    bool long_sentence = false;
    int64_t tokens = 0;
    for (int64_t s = first; s < last && !long_sentence; ++s) {
      long_sentence = o.long_sentence_len > 0 && sizes[static_cast<size_t>(s)] > o.long_sentence_len;
      tokens += sizes[static_cast<size_t>(s)];
    }
    if (!long_sentence && tokens >= o.min_tokens) usable.push_back(d);
  }
  SentenceMapping m;
  m.documents_used = static_cast<int64_t>(usable.size());
  MF_CHECK(!usable.empty(), who, ": no document in [", r.begin, ", ", r.end, ") has ",
           min_sent >= 2 ? std::to_string(min_sent) + " or more sentences" : "a sentence",
           o.min_tokens > 1 ? ", " + std::to_string(o.min_tokens) + " or more tokens" : "",
           o.long_sentence_len > 0 ? " and none longer than " + std::to_string(o.long_sentence_len) + " tokens" : "",
           hint);

  // helpers.cpp build_mapping: one target length drawn per sample, sequentially, over all epochs.
  const uint64_t key = o.seed + kMappingKeyOffset;
  PhiloxStream draws(key, 0);
  const uint64_t short_ratio = o.short_seq_prob > 0 ? static_cast<uint64_t>(std::llround(1.0 / o.short_seq_prob)) : 0;
  auto target_length = [&]() -> int32_t {
    if (short_ratio == 0) return static_cast<int32_t>(o.max_num_tokens);
    uint64_t x = draws.next_u64();
    if (x % short_ratio == 0) return static_cast<int32_t>(2 + (x >> 32) % static_cast<uint64_t>(o.max_num_tokens - 1));
    return static_cast<int32_t>(o.max_num_tokens);
  };
  // The mapping, its permutation and its shuffled copy.
  check_host_holds(static_cast<double>(o.num_samples) * (2 * sizeof(SentenceMapping::Entry) + sizeof(int64_t)),
                   detail::cat(who, ": ", o.num_samples, " samples need a sample mapping of "),
                   " — fewer samples (train.train_iter, the batch size, evaluation) fit");
  std::vector<SentenceMapping::Entry>& entries = m.entries;
  do {
    const size_t before = entries.size();
    for (int64_t d : usable) {
      int64_t first = doc_idx[static_cast<size_t>(d)], last = doc_idx[static_cast<size_t>(d) + 1];
      int64_t start = first, len = 0, num_sent = 0;
      int32_t target = target_length();
      for (int64_t s = first; s < last; ++s) {
        len += sizes[static_cast<size_t>(s)];
        ++num_sent;
        int64_t remaining = last - s - 1;
        if ((len >= target && remaining > 1 && num_sent >= min_sent) || remaining == 0) {
          if (len >= o.min_tokens) entries.push_back({start, s + 1, target});
          start = s + 1;
          len = num_sent = 0;
          if (remaining > 0) target = target_length();
        }
      }
    }
    MF_CHECK(entries.size() > before, who, ": an epoch gave no sample");  // unreachable: a usable document gives one
    if (++m.num_epochs == 1) m.samples_per_epoch = static_cast<int64_t>(entries.size());
  } while (o.num_samples > 0 && static_cast<int64_t>(entries.size()) < o.num_samples);

  std::vector<int64_t> perm = random_permutation(static_cast<int64_t>(entries.size()), key, 1);
  std::vector<SentenceMapping::Entry> shuffled(entries.size());
  for (size_t k = 0; k < perm.size(); ++k) shuffled[k] = entries[static_cast<size_t>(perm[k])];
  entries = std::move(shuffled);
  entries.resize(o.num_samples > 0 ? static_cast<size_t>(o.num_samples) : entries.size());
  entries.shrink_to_fit();
  return m;
}

}  // namespace mf
