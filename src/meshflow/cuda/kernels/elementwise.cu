// CUDA kernels: binary ops with broadcasting (strided inputs), unary ops and activations, and
// activation backward. f32, f64, bf16, f16; bf16/f16 computed in f32 and rounded once (the
// result of the op layer's cast -> f32 kernel -> cast path). Formulas as in ops/cpu/elementwise.cpp.
#include "meshflow/cuda/kernels/device_math.cuh"
#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

template <BinaryOp OP, class A>
__device__ __forceinline__ A apply_binary(A a, A b) {
  if constexpr (OP == BinaryOp::kAdd) return a + b;
  else if constexpr (OP == BinaryOp::kSub) return a - b;
  else if constexpr (OP == BinaryOp::kMul) return a * b;
  else return a / b;
}

template <class T, BinaryOp OP>
struct BinaryF {
  __device__ __forceinline__ T operator()(T a, T b) const {
    return from_acc<T>(apply_binary<OP>(to_acc(a), to_acc(b)));
  }
};

// out (n) contiguous; a, b strided views of out's shape (stride 0 on broadcast axes).
template <class T, BinaryOp OP>
__global__ void binary_strided_kernel(const T* a, Strided sa, const T* b, Strided sb, T* out, int64_t n) {
  BinaryF<T, OP> f;
  MF_GRID_STRIDE(i, n) out[i] = f(a[sa.offset(i)], b[sb.offset(i)]);
}

template <class T, BinaryOp OP>
void binary_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const T* pa = ptr<T>(a);
  const T* pb = ptr<T>(b);
  T* po = ptr<T>(out);
  if (a.is_contiguous() && b.is_contiguous()) {
    launch_map2(pa, pb, po, n, BinaryF<T, OP>{});
    return;
  }
  binary_strided_kernel<T, OP><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(pa, strided_of(a), pb,
                                                                                        strided_of(b), po, n);
  MF_CUDA_LAUNCH_CHECK();
}

// a, b: out's shape, any strides; out contiguous.
template <class T>
void binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = "binary (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(a, dt, name, "a");
  check_dtype(b, dt, name, "b");
  check_dtype(out, dt, name, "out");
  check_contiguous(out, name, "out");
  MF_CHECK(a.shape() == out.shape() && b.shape() == out.shape(), name, ": a ", a.str(), ", b ", b.str(), " and out ",
           out.str(), " differ in shape");
  switch (op) {
    case BinaryOp::kAdd: return binary_typed<T, BinaryOp::kAdd>(a, b, out);
    case BinaryOp::kSub: return binary_typed<T, BinaryOp::kSub>(a, b, out);
    case BinaryOp::kMul: return binary_typed<T, BinaryOp::kMul>(a, b, out);
    case BinaryOp::kDiv: return binary_typed<T, BinaryOp::kDiv>(a, b, out);
  }
  MF_THROW(name, ": unknown binary op ", static_cast<int>(op));
}

template <class T, UnaryOp OP>
struct UnaryF {
  Acc<T> alpha;
  __device__ __forceinline__ T operator()(T xs) const {
    using A = Acc<T>;
    A x = to_acc(xs), y;
    if constexpr (OP == UnaryOp::kNeg) y = -x;
    else if constexpr (OP == UnaryOp::kScale) y = x * alpha;
    else if constexpr (OP == UnaryOp::kAddScalar) y = x + alpha;
    else if constexpr (OP == UnaryOp::kExp) y = dev_exp(x);
    else if constexpr (OP == UnaryOp::kLog) y = dev_log(x);
    else if constexpr (OP == UnaryOp::kSqrt) y = dev_sqrt(x);
    else if constexpr (OP == UnaryOp::kGeluTanh) y = gelu_tanh_fwd(x);
    else if constexpr (OP == UnaryOp::kGeluErf) y = gelu_erf_fwd(x);
    else if constexpr (OP == UnaryOp::kSilu) y = x * dev_sigmoid(x);
    else if constexpr (OP == UnaryOp::kTanh) y = tanh(x);
    else y = x > A(0) ? x : A(0);  // kRelu
    return from_acc<T>(y);
  }
};

template <class T, UnaryOp OP>
void unary_typed(double alpha, const T* x, T* y, int64_t n) {
  launch_map1(x, y, n, UnaryF<T, OP>{static_cast<Acc<T>>(alpha)});
}

// x, out: contiguous, same numel (out may be x: scale_ runs in place).
template <class T>
void unary_kernel(UnaryOp op, double alpha, const Tensor& x, const Tensor& out) {
  const char* name = "unary (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(x, dt, name, "x");
  check_dtype(out, dt, name, "out");
  check_contiguous(x, name, "x");
  check_contiguous(out, name, "out");
  check_numel(out, x.numel(), name, "out");
  const T* px = ptr<T>(x);
  T* py = ptr<T>(out);
  const int64_t n = x.numel();
  switch (op) {
    case UnaryOp::kNeg: return unary_typed<T, UnaryOp::kNeg>(alpha, px, py, n);
    case UnaryOp::kScale: return unary_typed<T, UnaryOp::kScale>(alpha, px, py, n);
    case UnaryOp::kAddScalar: return unary_typed<T, UnaryOp::kAddScalar>(alpha, px, py, n);
    case UnaryOp::kExp: return unary_typed<T, UnaryOp::kExp>(alpha, px, py, n);
    case UnaryOp::kLog: return unary_typed<T, UnaryOp::kLog>(alpha, px, py, n);
    case UnaryOp::kSqrt: return unary_typed<T, UnaryOp::kSqrt>(alpha, px, py, n);
    case UnaryOp::kGeluTanh: return unary_typed<T, UnaryOp::kGeluTanh>(alpha, px, py, n);
    case UnaryOp::kGeluErf: return unary_typed<T, UnaryOp::kGeluErf>(alpha, px, py, n);
    case UnaryOp::kSilu: return unary_typed<T, UnaryOp::kSilu>(alpha, px, py, n);
    case UnaryOp::kRelu: return unary_typed<T, UnaryOp::kRelu>(alpha, px, py, n);
    case UnaryOp::kTanh: return unary_typed<T, UnaryOp::kTanh>(alpha, px, py, n);
  }
  MF_THROW(name, ": unknown unary op ", static_cast<int>(op));
}

// dx = dy * f'(x)
template <class T, UnaryOp OP>
struct ActivationGradF {
  __device__ __forceinline__ T operator()(T dys, T xs) const {
    using A = Acc<T>;
    A x = to_acc(xs), d;
    if constexpr (OP == UnaryOp::kGeluTanh) d = gelu_tanh_grad(x);
    else if constexpr (OP == UnaryOp::kGeluErf) d = gelu_erf_grad(x);
    else if constexpr (OP == UnaryOp::kSilu) d = silu_grad(x);
    else if constexpr (OP == UnaryOp::kTanh) d = A(1) - tanh(x) * tanh(x);
    else d = x > A(0) ? A(1) : A(0);  // kRelu
    return from_acc<T>(to_acc(dys) * d);
  }
};

// dy, x, dx: contiguous, same numel.
template <class T>
void activation_backward_kernel(UnaryOp op, const Tensor& dy, const Tensor& x, const Tensor& dx) {
  const char* name = "activation_backward (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(dy, dt, name, "dy");
  check_dtype(x, dt, name, "x");
  check_dtype(dx, dt, name, "dx");
  check_contiguous(dy, name, "dy");
  check_contiguous(x, name, "x");
  check_contiguous(dx, name, "dx");
  check_numel(dy, x.numel(), name, "dy");
  check_numel(dx, x.numel(), name, "dx");
  const T* pdy = ptr<T>(dy);
  const T* px = ptr<T>(x);
  T* pdx = ptr<T>(dx);
  const int64_t n = x.numel();
  switch (op) {
    case UnaryOp::kGeluTanh: return launch_map2(pdy, px, pdx, n, ActivationGradF<T, UnaryOp::kGeluTanh>{});
    case UnaryOp::kGeluErf: return launch_map2(pdy, px, pdx, n, ActivationGradF<T, UnaryOp::kGeluErf>{});
    case UnaryOp::kSilu: return launch_map2(pdy, px, pdx, n, ActivationGradF<T, UnaryOp::kSilu>{});
    case UnaryOp::kRelu: return launch_map2(pdy, px, pdx, n, ActivationGradF<T, UnaryOp::kRelu>{});
    case UnaryOp::kTanh: return launch_map2(pdy, px, pdx, n, ActivationGradF<T, UnaryOp::kTanh>{});
    default: MF_THROW("activation_backward: op ", static_cast<int>(op), " is not an activation");
  }
}

template <DType D>
void register_for(KernelRegistry& r) {
  using T = typename DeviceTypeOf<D>::type;
  r.add<kernels::Binary>("binary", DeviceType::kCUDA, D, binary_kernel<T>);
  r.add<kernels::Unary>("unary", DeviceType::kCUDA, D, unary_kernel<T>);
  r.add<kernels::ActivationBackward>("activation_backward", DeviceType::kCUDA, D, activation_backward_kernel<T>);
}

}  // namespace

void register_elementwise(KernelRegistry& r) {
  register_for<DType::kF32>(r);
  register_for<DType::kF64>(r);
  register_for<DType::kBF16>(r);
  register_for<DType::kF16>(r);
}

}  // namespace mf::cuda
