#include "meshflow/tensor/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "meshflow/core/error.h"
#include "meshflow/ops/registry.h"

namespace mf {

void* Allocator::allocate(size_t nbytes) {
  void* p = raw_allocate(nbytes);
  int64_t cur = current_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
  int64_t peak = peak_.load();
  while (cur > peak && !peak_.compare_exchange_weak(peak, cur)) {
  }
  num_allocs_.fetch_add(1);
  return p;
}

void Allocator::deallocate(void* ptr, size_t nbytes) {
  raw_deallocate(ptr, nbytes);
  current_.fetch_sub(static_cast<int64_t>(nbytes));
}

MemoryStats Allocator::stats() const {
  return {current_.load(), peak_.load(), num_allocs_.load(), reserved_bytes()};
}

void Allocator::reset_peak() { peak_.store(current_.load()); }

void Allocator::copy_to_host(void* host_dst, const void* src, size_t nbytes) const {
  if (nbytes) std::memcpy(host_dst, src, nbytes);
}
void Allocator::copy_from_host(void* dst, const void* host_src, size_t nbytes) const {
  if (nbytes) std::memcpy(dst, host_src, nbytes);
}
void Allocator::copy_within(void* dst, const void* src, size_t nbytes) const {
  if (nbytes) std::memmove(dst, src, nbytes);
}

namespace {

// Host memory, 64-byte aligned. Blocks of 1 MiB and more are cached by size class (at most
// 12.5% rounding) and reused: fresh large allocations are mmap'ed by libc and would page-fault
// on every first touch, which costs more than the kernels that fill them. Large blocks ask
// for transparent huge pages. The cache is capped (MESHFLOW_CPU_CACHE_MB, default a quarter
// of physical memory); beyond the cap freed blocks go back to the system.
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    const char* env = std::getenv("MESHFLOW_CPU_CACHE_MB");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    cache_cap_ = env ? static_cast<size_t>(std::atoll(env)) << 20
                     : (pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 4 : size_t{1} << 32);
  }
  ~CpuAllocator() override { empty_cache(); }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : cache_) std::free(p);
    cache_.clear();
    cached_bytes_ = 0;
  }

 protected:
  void* raw_allocate(size_t nbytes) override {
    if (nbytes < kCacheMin) {
      size_t rounded = std::max<size_t>(64, (nbytes + 63) / 64 * 64);
      live_small_.fetch_add(rounded);
      return checked(std::aligned_alloc(64, rounded), nbytes);
    }
    size_t cls = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(cls);
      if (it != cache_.end()) {
        void* p = it->second;
        cache_.erase(it);
        cached_bytes_ -= cls;
        live_large_ += cls;
        return p;
      }
      live_large_ += cls;
    }
    void* p = std::aligned_alloc(kHuge, cls);
    if (!p) {
      empty_cache();
      p = std::aligned_alloc(kHuge, cls);
    }
    if (p) madvise(p, cls, MADV_HUGEPAGE);
    return checked(p, nbytes);
  }

  void raw_deallocate(void* ptr, size_t nbytes) override {
    if (nbytes < kCacheMin) {
      live_small_.fetch_sub(std::max<size_t>(64, (nbytes + 63) / 64 * 64));
      std::free(ptr);
      return;
    }
    size_t cls = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    live_large_ -= cls;
    if (cached_bytes_ + cls > cache_cap_) {
      std::free(ptr);
      return;
    }
    cache_.emplace(cls, ptr);
    cached_bytes_ += cls;
  }

  int64_t reserved_bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(cached_bytes_ + live_large_ + live_small_.load());
  }

 private:
  static constexpr size_t kCacheMin = size_t{1} << 20;
  static constexpr size_t kHuge = size_t{2} << 20;

  static size_t size_class(size_t n) {
    size_t top = size_t{1} << (63 - __builtin_clzll(n));
    size_t step = std::max<size_t>(top / 8, kHuge);
    return (n + step - 1) / step * step;
  }
  static void* checked(void* p, size_t nbytes) {
    MF_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }

  mutable std::mutex mu_;
  std::multimap<size_t, void*> cache_;
  size_t cached_bytes_ = 0, live_large_ = 0, cache_cap_ = 0;
  std::atomic<size_t> live_small_{0};
};

Allocator* g_allocators[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu_alloc;
  if (device.type == DeviceType::kCPU) return cpu_alloc;
  init();  // backends install their allocators there
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  MF_CHECK(a != nullptr, "no allocator for device ", device.str(),
           cuda_backend_compiled() ? ": the CUDA backend is not initialised" : ": this build has no CUDA backend (configure with the CUDA toolkit, MESHFLOW_WITH_CUDA=ON)");
  return *a;
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t nbytes) {
  if (src_device.type == DeviceType::kCPU)
    allocator_for(dst_device).copy_from_host(dst, src, nbytes);
  else if (dst_device.type == DeviceType::kCPU)
    allocator_for(src_device).copy_to_host(dst, src, nbytes);
  else if (src_device == dst_device)
    allocator_for(src_device).copy_within(dst, src, nbytes);
  else
    MF_THROW("copy from ", src_device.str(), " to ", dst_device.str(), ": copies between two GPUs are not supported");
}

void set_allocator(DeviceType type, Allocator* alloc) { g_allocators[static_cast<int>(type)] = alloc; }

}  // namespace mf
