#include "meshflow/cuda/pinned.h"

#include <algorithm>

#include "meshflow/cuda/runtime.h"

namespace mf::cuda {

PinnedPool::~PinnedPool() {
  // Process exit: the driver may already be shutting down, so errors are ignored here.
  for (auto& p : pending_) {
    cudaEventSynchronize(p.done);
    cudaEventDestroy(p.done);
    cudaFreeHost(p.block.data());
  }
  for (auto& b : free_) cudaFreeHost(b.data());
  for (auto e : spare_events_) cudaEventDestroy(e);
}

void PinnedPool::collect_completed() {
  for (size_t i = 0; i < pending_.size();) {
    cudaError_t st = cudaEventQuery(pending_[i].done);
    if (st == cudaErrorNotReady) {
      ++i;
      continue;
    }
    MF_CUDA_CHECK(st);
    free_.push_back(pending_[i].block);
    spare_events_.push_back(pending_[i].done);
    pending_[i] = pending_.back();
    pending_.pop_back();
  }
}

PinnedBlock PinnedPool::take(size_t nbytes) {
  size_t size = size_t{64} << 10;
  while (size < nbytes) size <<= 1;
  std::lock_guard<std::mutex> lock(mu_);
  collect_completed();
  // Smallest free block that fits.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->nbytes() >= size && (best == free_.end() || it->nbytes() < best->nbytes())) best = it;
  if (best != free_.end()) {
    PinnedBlock b = *best;
    *best = free_.back();
    free_.pop_back();
    return b;
  }
  void* p = nullptr;
  MF_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
  reserved_ += size;
  return PinnedBlock(p, size);
}

void PinnedPool::give_back(PinnedBlock block, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  cudaEvent_t ev;
  if (!spare_events_.empty()) {
    ev = spare_events_.back();
    spare_events_.pop_back();
  } else {
    MF_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  }
  MF_CUDA_CHECK(cudaEventRecord(ev, stream));
  pending_.push_back({block, ev});
}

size_t PinnedPool::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

PinnedPool& pinned_pool() {
  static PinnedPool* pool = new PinnedPool();  // leaked on purpose: outlives every static user
  return *pool;
}

}  // namespace mf::cuda
