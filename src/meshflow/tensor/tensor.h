// Tensor: a cheap handle (shared_ptr) to a TensorImpl, which holds shape, strides (elements),
// offset (elements) and dtype over a reference-counted Storage, plus autograd metadata.
// Views (reshape of contiguous data, permute, narrow, expand) share storage.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/core/device.h"
#include "meshflow/core/dtype.h"
#include "meshflow/core/error.h"
#include "meshflow/core/shape.h"
#include "meshflow/tensor/storage.h"

namespace mf {

class Node;
class Tensor;
// Runs once a leaf's gradient is final for the current backward pass (data-parallel
// bucketing hangs off this); receives the leaf.
using GradReadyHook = std::function<void(const Tensor&)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // elements
  DType dtype = DType::kF32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_accumulator;  // leaves that require grad
  std::vector<GradReadyHook> grad_ready_hooks;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- metadata
  const Shape& shape() const { return get().shape; }
  int64_t shape(int64_t axis) const;  // negative axes count from the end
  const Strides& strides() const { return get().strides; }
  int64_t stride(int64_t axis) const;
  int64_t offset() const { return get().offset; }
  int64_t ndim() const { return static_cast<int64_t>(get().shape.size()); }
  int64_t numel() const { return shape_numel(get().shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_nbytes(dtype()); }
  DType dtype() const { return get().dtype; }
  Device device() const { return get().storage->device(); }
  bool is_contiguous() const;
  std::string str() const;  // "f32(2, 3) on cpu:0"

  // ---- data (host memory)
  void* raw_data() const;
  template <class T>
  T* data() const {
    MF_CHECK(DTypeOf<T>::value == dtype(), "data<", dtype_name(DTypeOf<T>::value), ">() on a tensor of dtype ",
             dtype_name(dtype()));
    return static_cast<T*>(raw_data());
  }
  template <class T>
  std::vector<T> to_vector() const;  // logical order, any strides
  double item() const;               // one element, as double

  // ---- autograd
  bool requires_grad() const { return defined() && get().requires_grad; }
  Tensor& set_requires_grad(bool on);  // leaves only
  bool is_leaf() const { return get().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return get().grad_fn; }
  Tensor grad() const { return Tensor(get().grad); }
  void set_grad(const Tensor& g) { get().grad = g.impl_; }
  void zero_grad() { get().grad.reset(); }
  // Backpropagates from this tensor. `grad` defaults to ones for a one-element tensor.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, no autograd history
  void register_grad_ready_hook(GradReadyHook hook);

 private:
  TensorImpl& get() const {
    MF_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// ---- factories
Tensor empty(const Shape& shape, DType dtype = DType::kF32, Device device = cpu_device());
Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = cpu_device());
Tensor ones(const Shape& shape, DType dtype = DType::kF32, Device device = cpu_device());
Tensor full(const Shape& shape, double value, DType dtype = DType::kF32, Device device = cpu_device());
Tensor arange(int64_t n, DType dtype = DType::kI64);
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
// A view of `base`'s storage with the given geometry (elements); checks it stays in bounds.
Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset);

}  // namespace mf
