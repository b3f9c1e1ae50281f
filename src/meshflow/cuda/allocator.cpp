#include "meshflow/cuda/allocator.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "meshflow/cuda/pinned.h"
#include "meshflow/cuda/runtime.h"
#include "meshflow/tensor/allocator.h"

namespace mf::cuda {
namespace {

struct Block {
  size_t size = 0;                    // the size class (bytes actually reserved)
  std::vector<cudaStream_t> streams;  // other streams that used it (record_stream)
};

struct PendingFree {
  void* ptr;
  size_t size;
  std::vector<cudaEvent_t> events;
};

class CudaCachingAllocator final : public Allocator {
 public:
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache_locked();
  }

  void copy_to_host(void* host_dst, const void* src, size_t nbytes) const override {
    copy_device_to_host(host_dst, src, nbytes);
  }
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) const override {
    copy_host_to_device(dst, host_src, nbytes);
  }
  void copy_within(void* dst, const void* src, size_t nbytes) const override {
    copy_device_to_device(dst, src, nbytes);
  }

  void record_stream(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(const_cast<void*>(ptr));
    MF_CHECK(it != live_.end(), "cuda allocator: record_stream on a pointer it did not allocate");
    auto& s = it->second.streams;
    if (std::find(s.begin(), s.end(), stream) == s.end()) s.push_back(stream);
  }

 protected:
  void* raw_allocate(size_t nbytes) override {
    size_t cls = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    collect_pending_locked();
    auto it = cache_.find(cls);
    if (it != cache_.end()) {
      void* p = it->second;
      cache_.erase(it);
      cached_bytes_ -= cls;
      live_[p] = Block{cls, {}};
      live_bytes_ += cls;
      return p;
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      // Give the cache back (after the work that may still use pending blocks) and retry once.
      MF_CUDA_CHECK(cudaDeviceSynchronize());
      collect_pending_locked();
      release_cache_locked();
      err = cudaMalloc(&p, cls);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      MF_THROW("cuda allocator: out of memory allocating ", nbytes, " bytes on cuda:", current_device(), " (",
               cudaGetErrorString(err), "; live blocks ", live_bytes_, " bytes, device free ", free_b, " of ",
               total_b, " bytes); lower train.train_micro_batch_size or turn on train.activation_checkpoint");
    }
    live_[p] = Block{cls, {}};
    live_bytes_ += cls;
    return p;
  }

  void raw_deallocate(void* ptr, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: a bug elsewhere, but never throw from a destructor
    Block b = std::move(it->second);
    live_.erase(it);
    live_bytes_ -= b.size;
    if (b.streams.empty()) {  // used only on the compute stream: stream order makes reuse safe
      cache_.emplace(b.size, ptr);
      cached_bytes_ += b.size;
      return;
    }
    PendingFree pf{ptr, b.size, {}};
    for (cudaStream_t s : b.streams) {
      cudaEvent_t ev;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
          cudaEventRecord(ev, s) != cudaSuccess) {
        cudaGetLastError();
        cudaDeviceSynchronize();  // cannot order it: wait for everything instead
        continue;
      }
      pf.events.push_back(ev);
    }
    pending_.push_back(std::move(pf));
  }

  int64_t reserved_bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t pending = 0;
    for (auto& p : pending_) pending += p.size;
    return static_cast<int64_t>(live_bytes_ + cached_bytes_ + pending);
  }

 private:
  // Below 1 MiB: the next power of two (512 B at least); above: steps of 1/8 of the leading
  // power of two (at most 12.5% rounding), so a few classes serve a training step's tensors.
  static size_t size_class(size_t n) {
    if (n <= 512) return 512;
    if (n < (size_t{1} << 20)) return size_t{1} << (64 - __builtin_clzll(n - 1));
    size_t top = size_t{1} << (63 - __builtin_clzll(n));
    size_t step = top / 8;
    return (n + step - 1) / step * step;
  }

  void collect_pending_locked() {
    for (size_t i = 0; i < pending_.size();) {
      auto& pf = pending_[i];
      bool done = true;
      for (cudaEvent_t ev : pf.events) {
        cudaError_t st = cudaEventQuery(ev);
        if (st == cudaErrorNotReady) {
          done = false;
          break;
        }
      }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t ev : pf.events) cudaEventDestroy(ev);
      cache_.emplace(pf.size, pf.ptr);
      cached_bytes_ += pf.size;
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
  }

  void release_cache_locked() {
    if (cache_.empty()) return;
    cudaDeviceSynchronize();
    for (auto& [size, p] : cache_) cudaFree(p);
    cache_.clear();
    cached_bytes_ = 0;
  }

  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  std::multimap<size_t, void*> cache_;
  std::vector<PendingFree> pending_;
  size_t live_bytes_ = 0, cached_bytes_ = 0;
};

CudaCachingAllocator& caching_allocator() {
  static CudaCachingAllocator* a = new CudaCachingAllocator();  // outlives static tensors at exit
  return *a;
}

}  // namespace

void record_stream(const void* ptr, cudaStream_t stream) { caching_allocator().record_stream(ptr, stream); }

void install_allocator() { set_allocator(DeviceType::kCUDA, &caching_allocator()); }

}  // namespace mf::cuda
