// Micro-batches of sample indices, Megatron's pre-training sampler. Samples are taken in order
// (the dataset already shuffles) from a position `consumed` that counts samples of all
// data-parallel ranks: each call takes the next global micro-batch of micro_batch_size * world
// indices, of which rank r gets [r * mb, (r + 1) * mb). Indices wrap around modulo the dataset
// size (size the dataset to the run, as Megatron does, to never repeat a sample). The position
// is the whole state: save state(), restore with set_state(), and batches continue identically.
#pragma once
#include <cstdint>
#include <vector>

namespace mf {

class Sampler {
 public:
  explicit Sampler(int64_t total_samples, int64_t rank = 0, int64_t world = 1, uint64_t consumed = 0);

  std::vector<int64_t> next_batch(int64_t micro_batch_size);

  uint64_t state() const { return consumed_; }  // samples consumed by all ranks together
  void set_state(uint64_t consumed) { consumed_ = consumed; }
  int64_t total_samples() const { return total_; }
  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }

 private:
  int64_t total_, rank_, world_;
  uint64_t consumed_;
};

}  // namespace mf
