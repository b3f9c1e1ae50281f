// GptDataset: document order per epoch, sample starts over the concatenated stream, sample
// shuffle (see gpt_dataset.h).
#include "meshflow/data/gpt_dataset.h"

#include <algorithm>
#include <limits>

#include "meshflow/core/error.h"
#include "meshflow/core/host_memory.h"
#include "meshflow/data/shuffle.h"

namespace mf {
namespace {
constexpr uint64_t kSampleStream = 0;  // document order of epoch e uses stream 1 + e
}

GptDataset::GptDataset(const IndexedDataset& data, int64_t seq_length, uint64_t seed, int64_t num_samples,
                       DocumentRange documents)
    : data_(data), seq_length_(seq_length), num_samples_(num_samples) {
  MF_CHECK(seq_length > 0, "GptDataset ", data.prefix(), ": seq_length must be positive, got ", seq_length);
  MF_CHECK(documents.begin >= 0 && documents.begin < documents.end && documents.end <= data.num_sequences(),
           "GptDataset ", data.prefix(), ": document range [", documents.begin, ", ", documents.end,
           ") is empty or outside [0, ", data.num_sequences(), ")");
  for (int64_t d = documents.begin; d < documents.end; ++d) tokens_per_epoch_ += data.sequence_length(d);
  MF_CHECK(tokens_per_epoch_ > seq_length, "GptDataset ", data.prefix(), ": documents [", documents.begin, ", ",
           documents.end, ") hold ", tokens_per_epoch_, " tokens, fewer than seq_length + 1 = ", seq_length + 1);
  if (num_samples_ <= 0) num_samples_ = (tokens_per_epoch_ - 1) / seq_length;
  // Epochs needed so that the stream holds num_samples * L + 1 tokens.
  MF_CHECK(num_samples_ <= (std::numeric_limits<int64_t>::max() - 1) / seq_length, "GptDataset ", data.prefix(), ": ",
           num_samples_, " samples of ", seq_length, " tokens are more tokens than int64 counts");
  num_epochs_ = num_samples_ * seq_length / tokens_per_epoch_ + 1;  // ceil((N L + 1) / T), with no overflow

  const int64_t ndocs = documents.size();
  // The index: every epoch's document order, a start and a shuffled position per sample.
  check_host_holds(static_cast<double>(num_epochs_) * static_cast<double>(ndocs) * sizeof(int64_t) +
                       static_cast<double>(num_samples_) * (sizeof(Start) + sizeof(int64_t)),
                   detail::cat("GptDataset ", data.prefix(), ": ", num_samples_, " samples of ", seq_length, " tokens (",
                               num_epochs_, " epochs of ", ndocs, " documents) need an index of "),
                   " — fewer samples (train.train_iter, the batch size, evaluation) fit");
  doc_order_.reserve(static_cast<size_t>(num_epochs_ * ndocs));
  for (int64_t e = 0; e < num_epochs_; ++e)
    for (int64_t p : random_permutation(ndocs, seed, 1 + static_cast<uint64_t>(e)))
      doc_order_.push_back(documents.begin + p);

  starts_.resize(static_cast<size_t>(num_samples_));
  int64_t pos = 0, offset = 0;  // walk the stream in steps of seq_length tokens
  for (int64_t j = 0; j < num_samples_; ++j) {
    while (offset >= data.sequence_length(doc_order_[pos])) {
      offset -= data.sequence_length(doc_order_[pos]);
      ++pos;
    }
    starts_[j] = {pos, offset};
    offset += seq_length;
  }
  shuffle_ = random_permutation(num_samples_, seed, kSampleStream);
}

void GptDataset::sample_into(int64_t i, std::vector<int32_t>& out) const {
  MF_CHECK(i >= 0 && i < num_samples_, "GptDataset ", data_.prefix(), ": sample ", i, " outside [0, ", num_samples_,
           ")");
  out.clear();
  out.reserve(static_cast<size_t>(seq_length_ + 1));
  Start s = starts_[shuffle_[i]];
  int64_t need = seq_length_ + 1, pos = s.doc_pos, offset = s.offset;
  while (need > 0) {
    MF_CHECK(pos < static_cast<int64_t>(doc_order_.size()), "GptDataset: internal error, sample ", i,
             " runs past the stream");
    int64_t doc = doc_order_[pos];
    int64_t take = std::min(need, data_.sequence_length(doc) - offset);
    if (take > 0) data_.read(doc, offset, take, out);
    need -= std::max<int64_t>(take, 0);
    ++pos;
    offset = 0;
  }
}

std::vector<int32_t> GptDataset::sample(int64_t i) const {
  std::vector<int32_t> out;
  sample_into(i, out);
  return out;
}

}  // namespace mf
