// CUDA kernels: strided copy, dtype casts, fill, in-place accumulate (dst += alpha * src) and
// where. Casts convert exactly as ops/cpu/copy.cpp does (bf16/f16 by core/half.h's bit rules).
#include <cstring>

#include "meshflow/core/half.h"
#include "meshflow/cuda/kernels/half_bits.cuh"
#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

// ---- copy: by element size, as unsigned words.
template <class U>
__global__ void copy_strided_kernel(const U* src, Strided ss, U* dst, Strided sd, int64_t n) {
  MF_GRID_STRIDE(i, n) dst[sd.offset(i)] = src[ss.offset(i)];
}

template <class U>
void copy_typed(const Tensor& src, const Tensor& dst) {
  const int64_t n = src.numel();
  const U* s = ptr<const U>(src);
  U* d = ptr<U>(dst);
  copy_strided_kernel<U><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(s, strided_of(src), d,
                                                                                   strided_of(dst), n);
  MF_CUDA_LAUNCH_CHECK();
}

// src, dst: same shape and dtype, any strides.
void copy_kernel(const Tensor& src, const Tensor& dst) {
  const char* name = "copy (cuda)";
  check_cuda(src, name, "src");
  check_dtype(dst, src.dtype(), name, "dst");
  check_same_device(dst, src, name, "dst");
  MF_CHECK(src.shape() == dst.shape(), name, ": src ", src.str(), " and dst ", dst.str(), " differ in shape");
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.raw_data() != dst.raw_data())
      MF_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                    compute_stream()));
    return;
  }
  switch (dtype_nbytes(src.dtype())) {
    case 1: return copy_typed<uint8_t>(src, dst);
    case 2: return copy_typed<uint16_t>(src, dst);
    case 4: return copy_typed<uint32_t>(src, dst);
    case 8: return copy_typed<uint64_t>(src, dst);
  }
  MF_THROW(name, ": unsupported element size of ", src.str());
}

// ---- cast. Storage of each dtype on the device: bf16/f16 as their 16-bit patterns.
template <DType D> struct StoreOf { using type = typename DeviceTypeOf<D>::type; };
template <> struct StoreOf<DType::kBF16> { using type = uint16_t; };
template <> struct StoreOf<DType::kF16> { using type = uint16_t; };
template <DType D> using Store = typename StoreOf<D>::type;

template <DType D>
__device__ __forceinline__ float half_to_f32(uint16_t b) {
  if constexpr (D == DType::kBF16) return bf16_bits_to_f32(b);
  else return f16_bits_to_f32(b);
}
// ops/cpu/copy.cpp's widen(): the value as a double (bf16/f16 through f32).
template <DType S>
__device__ __forceinline__ double widen(Store<S> s) {
  if constexpr (S == DType::kBF16 || S == DType::kF16) return static_cast<double>(half_to_f32<S>(s));
  else if constexpr (S == DType::kBool) return s ? 1.0 : 0.0;
  else return static_cast<double>(s);
}
// f64 <-> f32 as the host converts a NaN (sign and top payload bits kept, quiet bit set); the
// GPU's cvt instructions return their canonical NaN instead.
__device__ __forceinline__ float f64_to_f32(double d) {
  if (isnan(d)) {
    const uint64_t b = static_cast<uint64_t>(__double_as_longlong(d));
    return __uint_as_float((static_cast<uint32_t>(b >> 32) & 0x80000000u) | 0x7fc00000u |
                           (static_cast<uint32_t>(b >> 29) & 0x7fffffu));
  }
  return static_cast<float>(d);
}
__device__ __forceinline__ double f32_to_f64(float f) {
  if (isnan(f)) {
    const uint64_t u = __float_as_uint(f);
    return __longlong_as_double(
        static_cast<long long>(((u & 0x80000000ull) << 32) | 0x7ff8000000000000ull | ((u & 0x7fffffull) << 29)));
  }
  return static_cast<double>(f);
}
template <DType S>
inline constexpr bool kFloating = S == DType::kF32 || S == DType::kF64 || S == DType::kBF16 || S == DType::kF16;
// A floating source as f32, NaNs as the host converts them.
template <DType S>
__device__ __forceinline__ float float_of(Store<S> s) {
  if constexpr (S == DType::kF64) return f64_to_f32(s);
  else if constexpr (S == DType::kF32) return s;
  else return half_to_f32<S>(s);
}

// ops/cpu/copy.cpp's convert<D>(S), case by case.
template <DType D, DType S>
__device__ __forceinline__ Store<D> convert(Store<S> s) {
  if constexpr (D == S) {
    return s;
  } else if constexpr (D == DType::kBool) {
    return widen<S>(s) != 0.0;
  } else if constexpr (D == DType::kBF16 || D == DType::kF16) {
    float f;
    if constexpr (kFloating<S>) f = float_of<S>(s);
    else f = static_cast<float>(widen<S>(s));
    if constexpr (D == DType::kBF16) return f32_to_bf16_bits(f);
    else return f32_to_f16_bits(f);
  } else if constexpr (D == DType::kF32 && kFloating<S>) {
    return float_of<S>(s);
  } else if constexpr (D == DType::kF64 && kFloating<S>) {
    return f32_to_f64(float_of<S>(s));  // S is f32, bf16 or f16 here (f64 -> f64 is D == S)
  } else if constexpr (S == DType::kBF16 || S == DType::kF16) {
    return static_cast<Store<D>>(half_to_f32<S>(s));
  } else {
    return static_cast<Store<D>>(s);
  }
}

template <DType D, DType S>
struct ConvertF {
  __device__ __forceinline__ Store<D> operator()(Store<S> s) const { return convert<D, S>(s); }
};

template <DType S, DType D>
void cast_to(const Tensor& src, const Tensor& dst) {
  launch_map1(ptr<const Store<S>>(src), ptr<Store<D>>(dst), src.numel(), ConvertF<D, S>{});
}

// src, dst: contiguous, same numel; registered under src's dtype S.
template <DType S>
void cast_kernel(const Tensor& src, const Tensor& dst) {
  const char* name = "cast (cuda)";
  check_dtype(src, S, name, "src");
  check_cuda(dst, name, "dst");
  check_same_device(dst, src, name, "dst");
  check_contiguous(src, name, "src");
  check_contiguous(dst, name, "dst");
  check_numel(dst, src.numel(), name, "dst");
  if (src.numel() == 0) return;
  switch (dst.dtype()) {
    case DType::kF32: return cast_to<S, DType::kF32>(src, dst);
    case DType::kF64: return cast_to<S, DType::kF64>(src, dst);
    case DType::kBF16: return cast_to<S, DType::kBF16>(src, dst);
    case DType::kF16: return cast_to<S, DType::kF16>(src, dst);
    case DType::kI32: return cast_to<S, DType::kI32>(src, dst);
    case DType::kI64: return cast_to<S, DType::kI64>(src, dst);
    case DType::kBool: return cast_to<S, DType::kBool>(src, dst);
  }
  MF_THROW(name, ": unsupported destination ", dst.str());
}

// ---- fill: the value converted on the host as the CPU converts it, stored by its bits.
template <class U>
__global__ void fill_contiguous_kernel(U* dst, int64_t n, U v) {
  MF_GRID_STRIDE(i, n) dst[i] = v;
}
template <class U>
__global__ void fill_strided_kernel(U* dst, Strided sd, int64_t n, U v) {
  MF_GRID_STRIDE(i, n) dst[sd.offset(i)] = v;
}

template <class U>
void fill_bits(const Tensor& dst, U v) {
  const int64_t n = dst.numel();
  U* d = ptr<U>(dst);
  if (dst.is_contiguous()) {
    if (v == U(0)) {
      MF_CUDA_CHECK(cudaMemsetAsync(d, 0, dst.nbytes(), compute_stream()));
      return;
    }
    fill_contiguous_kernel<U><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(d, n, v);
  } else {
    fill_strided_kernel<U><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(d, strided_of(dst), n, v);
  }
  MF_CUDA_LAUNCH_CHECK();
}

// The stored bits of `value` in dtype D (ops/cpu/copy.cpp's convert<T>(double)).
template <DType D>
auto host_value_bits(double value) {
  if constexpr (D == DType::kBF16) return BFloat16(static_cast<float>(value)).bits;
  else if constexpr (D == DType::kF16) return Float16(static_cast<float>(value)).bits;
  else if constexpr (D == DType::kBool) return static_cast<uint8_t>(value != 0.0 ? 1 : 0);
  else if constexpr (D == DType::kF32) {
    float f = static_cast<float>(value);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  } else if constexpr (D == DType::kF64) {
    uint64_t u;
    std::memcpy(&u, &value, 8);
    return u;
  } else if constexpr (D == DType::kI32) {
    return static_cast<uint32_t>(static_cast<int32_t>(value));
  } else {
    static_assert(D == DType::kI64);
    return static_cast<uint64_t>(static_cast<int64_t>(value));
  }
}

// dst: any strides.
template <DType D>
void fill_kernel(const Tensor& dst, double value) {
  check_dtype(dst, D, "fill (cuda)", "dst");
  if (dst.numel() == 0) return;
  auto bits = host_value_bits<D>(value);
  static_assert(sizeof(bits) == sizeof(Store<D>), "fill: stored size mismatch");
  fill_bits(dst, bits);
}

// ---- add_inplace: dst (contiguous) += alpha * src (dst's shape, any strides), in Acc<T>.
template <class T>
struct AxpyF {
  Acc<T> alpha;
  __device__ __forceinline__ T operator()(T d, T s) const { return from_acc<T>(to_acc(d) + alpha * to_acc(s)); }
};
template <class T>
__global__ void axpy_strided_kernel(T* dst, const T* src, Strided ss, int64_t n, Acc<T> alpha) {
  AxpyF<T> f{alpha};
  MF_GRID_STRIDE(i, n) dst[i] = f(dst[i], src[ss.offset(i)]);
}

template <class T>
void add_inplace_kernel(const Tensor& dst, const Tensor& src, double alpha) {
  const char* name = "add_inplace (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(dst, dt, name, "dst");
  check_dtype(src, dt, name, "src");
  check_same_device(src, dst, name, "src");
  check_contiguous(dst, name, "dst");
  MF_CHECK(src.shape() == dst.shape(), name, ": src ", src.str(), " and dst ", dst.str(), " differ in shape");
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Acc<T> a = static_cast<Acc<T>>(alpha);
  T* d = ptr<T>(dst);
  const T* s = ptr<const T>(src);
  if (src.is_contiguous()) {
    launch_map2(static_cast<const T*>(d), s, d, n, AxpyF<T>{a});
    return;
  }
  axpy_strided_kernel<T><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(d, s, strided_of(src), n, a);
  MF_CUDA_LAUNCH_CHECK();
}

// ---- where: out (contiguous) = cond ? a : b; cond (bool), a, b of out's shape, any strides.
template <class U>
__global__ void where_kernel_dev(const bool* c, Strided sc, const U* a, Strided sa, const U* b, Strided sb, U* out,
                                 int64_t n) {
  MF_GRID_STRIDE(i, n) out[i] = c[sc.offset(i)] ? a[sa.offset(i)] : b[sb.offset(i)];
}

template <DType D>
void where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = "where (cuda)";
  check_dtype(cond, DType::kBool, name, "cond");
  check_dtype(a, D, name, "a");
  check_dtype(b, D, name, "b");
  check_dtype(out, D, name, "out");
  check_same_device(cond, out, name, "cond");
  check_same_device(a, out, name, "a");
  check_same_device(b, out, name, "b");
  check_contiguous(out, name, "out");
  MF_CHECK(cond.shape() == out.shape() && a.shape() == out.shape() && b.shape() == out.shape(), name, ": cond ",
           cond.str(), ", a ", a.str(), ", b ", b.str(), " and out ", out.str(), " differ in shape");
  const int64_t n = out.numel();
  if (n == 0) return;
  using U = Store<D>;
  where_kernel_dev<U><<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const bool>(cond), strided_of(cond), ptr<const U>(a), strided_of(a), ptr<const U>(b), strided_of(b),
      ptr<U>(out), n);
  MF_CUDA_LAUNCH_CHECK();
}

template <DType D>
void register_for(KernelRegistry& r) {
  r.add<kernels::Copy>("copy", DeviceType::kCUDA, D, copy_kernel);
  r.add<kernels::Cast>("cast", DeviceType::kCUDA, D, cast_kernel<D>);
  r.add<kernels::Fill>("fill", DeviceType::kCUDA, D, fill_kernel<D>);
  r.add<kernels::Where>("where", DeviceType::kCUDA, D, where_kernel<D>);
}

}  // namespace

void register_copy(KernelRegistry& r) {
  register_for<DType::kF32>(r);
  register_for<DType::kF64>(r);
  register_for<DType::kBF16>(r);
  register_for<DType::kF16>(r);
  register_for<DType::kI32>(r);
  register_for<DType::kI64>(r);
  register_for<DType::kBool>(r);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCUDA, DType::kF32, add_inplace_kernel<float>);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCUDA, DType::kF64, add_inplace_kernel<double>);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCUDA, DType::kBF16, add_inplace_kernel<__nv_bfloat16>);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCUDA, DType::kF16, add_inplace_kernel<__half>);
}

}  // namespace mf::cuda
