// A reference-counted byte buffer on one device, returned to its allocator on destruction.
#pragma once
#include <cstddef>
#include <memory>

#include "meshflow/core/device.h"
#include "meshflow/tensor/allocator.h"

namespace mf {

class Storage {
 public:
  Storage(size_t nbytes, Device device)
      : nbytes_(nbytes), device_(device), alloc_(&allocator_for(device)), data_(alloc_->allocate(nbytes)) {}
  ~Storage() { alloc_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  size_t nbytes_;
  Device device_;
  Allocator* alloc_;
  void* data_;
};

}  // namespace mf
