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
  ~Storage() {
    if (data_) alloc_->deallocate(data_, nbytes_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // ZeRO-3 keeps a parameter's tensors (shape, views, autograd identity) while its bytes live
  // elsewhere: release() returns the buffer to the allocator, materialize() takes a new one of
  // the same size (contents undefined). Reading a released storage is a bug of the caller.
  void release() {
    if (data_) alloc_->deallocate(data_, nbytes_);
    data_ = nullptr;
  }
  void materialize() {
    if (!data_) data_ = alloc_->allocate(nbytes_);
  }
  bool resident() const { return data_ != nullptr || nbytes_ == 0; }
  size_t resident_nbytes() const { return data_ ? nbytes_ : 0; }
  Device device() const { return device_; }

 private:
  size_t nbytes_;
  Device device_;
  Allocator* alloc_;
  void* data_;
};

}  // namespace mf
