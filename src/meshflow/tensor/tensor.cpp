#include "meshflow/tensor/tensor.h"

#include <cstring>

#include "meshflow/autograd/engine.h"
#include "meshflow/autograd/node.h"
#include "meshflow/ops/ops.h"

namespace mf {

int64_t Tensor::shape(int64_t axis) const { return get().shape[normalize_axis(axis, ndim(), "shape")]; }
int64_t Tensor::stride(int64_t axis) const { return get().strides[normalize_axis(axis, ndim(), "stride")]; }

bool Tensor::is_contiguous() const {
  const auto& t = get();
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + shape_str(shape()) + " on " + device().str();
}

void* Tensor::raw_data() const {
  const auto& t = get();
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_nbytes(t.dtype));
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous(to(*this, cpu_device()));
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<Float16> Tensor::to_vector<Float16>() const;

double Tensor::item() const {
  MF_CHECK(numel() == 1, "item(): tensor ", str(), " has ", numel(), " elements, expected 1");
  Tensor c = cast(to(*this, cpu_device()), DType::kF64);
  return *c.data<double>();
}

Tensor& Tensor::set_requires_grad(bool on) {
  MF_CHECK(is_leaf(), "set_requires_grad: only leaf tensors (no grad_fn) can change requires_grad; ", str(),
           " was produced by ", grad_fn()->name());
  MF_CHECK(!on || is_floating(dtype()), "set_requires_grad: tensor ", str(), " is not floating point");
  get().requires_grad = on;
  return *this;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  Tensor g = grad;
  if (!g.defined()) {
    MF_CHECK(numel() == 1, "backward: implicit gradient only for one-element outputs; ", str(),
             " needs an explicit gradient");
    g = ones(shape(), dtype(), device());
  }
  run_backward({*this}, {g}, retain_graph);
}

Tensor Tensor::detach() const {
  auto t = std::make_shared<TensorImpl>();
  const auto& s = get();
  t->storage = s.storage;
  t->shape = s.shape;
  t->strides = s.strides;
  t->offset = s.offset;
  t->dtype = s.dtype;
  return Tensor(std::move(t));
}

void Tensor::register_grad_ready_hook(GradReadyHook hook) {
  MF_CHECK(is_leaf() && requires_grad(), "register_grad_ready_hook: ", str(),
           " must be a leaf that requires grad");
  get().grad_ready_hooks.push_back(std::move(hook));
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) MF_CHECK(d >= 0, "empty: negative size in shape ", shape_str(shape));
  size_t bytes = 0;
  MF_CHECK(!__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_nbytes(dtype), &bytes),
           "empty: shape ", shape_str(shape), " of ", dtype_name(dtype), " needs more bytes than size_t counts");
  auto t = std::make_shared<TensorImpl>();
  t->storage = std::make_shared<Storage>(bytes, device);
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  t->dtype = dtype;
  return Tensor(std::move(t));
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.type == DeviceType::kCPU) {
    std::memset(t.raw_data(), 0, t.nbytes());
  } else {
    fill_(t, 0.0);  // device memory: the device's fill kernel, never a host write
  }
  return t;
}

Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  fill_(t, value);
  return t;
}

Tensor arange(int64_t n, DType dtype) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return cast(from_vector(v, {n}), dtype);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  MF_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DTypeOf<T>::value);
  T* p = static_cast<T*>(t.raw_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&);
template Tensor from_vector<Float16>(const std::vector<Float16>&, const Shape&);

Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, int64_t offset) {
  MF_CHECK(shape.size() == strides.size(), "make_view: shape ", shape_str(shape), " and strides ",
           shape_str(strides), " differ in rank");
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) { lo = hi = offset; break; }
    int64_t span = (shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  int64_t cap = static_cast<int64_t>(base.impl()->storage->nbytes() / dtype_nbytes(base.dtype()));
  MF_CHECK(lo >= 0 && (shape_numel(shape) == 0 || hi < cap), "make_view: view ", shape_str(shape),
           " strides ", shape_str(strides), " offset ", offset, " exceeds storage of ", cap, " elements");
  auto t = std::make_shared<TensorImpl>();
  t->storage = base.impl()->storage;
  t->shape = shape;
  t->strides = strides;
  t->offset = offset;
  t->dtype = base.dtype();
  return Tensor(std::move(t));
}

}  // namespace mf
