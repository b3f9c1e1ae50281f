// Sequential data-parallel sampler with a one-number state.
#include "meshflow/data/sampler.h"

#include "meshflow/core/error.h"

namespace mf {

Sampler::Sampler(int64_t total_samples, int64_t rank, int64_t world, uint64_t consumed)
    : total_(total_samples), rank_(rank), world_(world), consumed_(consumed) {
  MF_CHECK(total_samples > 0, "Sampler: total_samples must be positive, got ", total_samples);
  MF_CHECK(world > 0 && rank >= 0 && rank < world, "Sampler: rank ", rank, " outside world of ", world);
}

std::vector<int64_t> Sampler::next_batch(int64_t micro_batch_size) {
  MF_CHECK(micro_batch_size > 0, "Sampler: micro_batch_size must be positive, got ", micro_batch_size);
  const uint64_t mb = static_cast<uint64_t>(micro_batch_size), total = static_cast<uint64_t>(total_);
  std::vector<int64_t> out(mb);
  const uint64_t first = consumed_ + static_cast<uint64_t>(rank_) * mb;
  for (uint64_t k = 0; k < mb; ++k) out[k] = static_cast<int64_t>((first + k) % total);
  consumed_ += mb * static_cast<uint64_t>(world_);
  return out;
}

}  // namespace mf
