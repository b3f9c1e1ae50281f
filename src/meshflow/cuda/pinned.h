// Pinned (page-locked) host memory for host-to-device copies: a pool of blocks reused once the
// copy that read them has completed (an event recorded on the copy's stream).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace mf::cuda {

class PinnedBlock {
 public:
  PinnedBlock() = default;
  PinnedBlock(void* data, size_t nbytes) : data_(data), nbytes_(nbytes) {}
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
};

class PinnedPool {
 public:
  ~PinnedPool();
  // A block of at least nbytes (sizes are rounded up to a power of two, 64 KiB at least).
  PinnedBlock take(size_t nbytes);
  // Returns the block once the work queued on `stream` so far has completed.
  void give_back(PinnedBlock block, cudaStream_t stream);
  size_t reserved_bytes() const;

 private:
  struct Pending {
    PinnedBlock block;
    cudaEvent_t done;
  };
  void collect_completed();  // caller holds mu_
  mutable std::mutex mu_;
  std::vector<PinnedBlock> free_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  size_t reserved_ = 0;
};

PinnedPool& pinned_pool();

}  // namespace mf::cuda
