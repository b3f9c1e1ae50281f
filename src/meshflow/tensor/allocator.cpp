#include "meshflow/tensor/allocator.h"

#include <cstdlib>
#include <new>

#include "meshflow/core/error.h"

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

MemoryStats Allocator::stats() const { return {current_.load(), peak_.load(), num_allocs_.load()}; }

void Allocator::reset_peak() { peak_.store(current_.load()); }

namespace {

// 64-byte aligned host memory (one cache line, one AVX-512 vector).
class CpuAllocator final : public Allocator {
 protected:
  void* raw_allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    MF_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }
  void raw_deallocate(void* ptr, size_t) override { std::free(ptr); }
};

Allocator* g_allocators[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(Device device) {
  static CpuAllocator cpu_alloc;
  if (device.type == DeviceType::kCPU) return cpu_alloc;
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  MF_CHECK(a != nullptr, "no allocator for device ", device.str(),
           ": this build has no backend for it (MESHFLOW_WITH_CUDA=OFF or no GPU)");
  return *a;
}

void set_allocator(DeviceType type, Allocator* alloc) { g_allocators[static_cast<int>(type)] = alloc; }

}  // namespace mf
