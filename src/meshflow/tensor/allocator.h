// Allocators, one per device, that count current and peak bytes (memory reports and the
// ZeRO tests read them) and copy bytes to and from the host. The CUDA backend installs its
// caching device allocator (cuda/allocator.h) in the kCUDA slot.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "meshflow/core/device.h"

namespace mf {

struct MemoryStats {
  int64_t current_bytes = 0;   // bytes of live tensors (as requested)
  int64_t peak_bytes = 0;      // highest current_bytes since start or reset_peak()
  int64_t num_allocs = 0;      // allocations made since start
  int64_t reserved_bytes = 0;  // held from the system: live blocks + the allocator's cache
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  void* allocate(size_t nbytes);
  void deallocate(void* ptr, size_t nbytes);
  MemoryStats stats() const;
  void reset_peak();  // peak := current
  virtual void empty_cache() {}  // returns cached blocks to the system

  // Copies between this device's memory and the host's (the CPU allocator: memcpy). Copies to
  // the host have completed on return; the others are ordered before later kernels.
  virtual void copy_to_host(void* host_dst, const void* src, size_t nbytes) const;
  virtual void copy_from_host(void* dst, const void* host_src, size_t nbytes) const;
  virtual void copy_within(void* dst, const void* src, size_t nbytes) const;

 protected:
  virtual void* raw_allocate(size_t nbytes) = 0;
  virtual void raw_deallocate(void* ptr, size_t nbytes) = 0;
  virtual int64_t reserved_bytes() const { return current_.load(); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0}, num_allocs_{0};
};

// The allocator serving `device`; throws if that device type has no backend in this build.
Allocator& allocator_for(Device device);
// Copies nbytes from `src` on `src_device` to `dst` on `dst_device` through the allocators' copy
// hooks: host <-> device, or within one device. Throws for two different GPUs.
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t nbytes);
// Installs the allocator of a backend (called by the backend's init, e.g. CUDA's).
void set_allocator(DeviceType type, Allocator* alloc);

}  // namespace mf
