// CPU kernels: strided copy, dtype casts, fill, in-place accumulate.
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

template <class U>  // U: an unsigned integer type of the element's size
void copy_typed(const Tensor& src, const Tensor& dst) {
  const U* s = static_cast<const U*>(src.raw_data());
  U* d = static_cast<U*>(dst.raw_data());
  if (src.is_contiguous() && dst.is_contiguous()) {
    parallel_for(src.numel(), 1 << 16, [&](int64_t lo, int64_t hi) { std::memcpy(d + lo, s + lo, (hi - lo) * sizeof(U)); });
    return;
  }
  for_each_row(src.shape(), src.strides(), dst.strides(), [&](int64_t, int64_t os, int64_t od, int64_t n, int64_t ss, int64_t sd) {
    if (ss == 1 && sd == 1) {
      std::memcpy(d + od, s + os, n * sizeof(U));
    } else {
      for (int64_t i = 0; i < n; ++i) d[od + i * sd] = s[os + i * ss];
    }
  });
}

void copy_kernel(const Tensor& src, const Tensor& dst) {
  switch (dtype_nbytes(src.dtype())) {
    case 1: return copy_typed<uint8_t>(src, dst);
    case 2: return copy_typed<uint16_t>(src, dst);
    case 4: return copy_typed<uint32_t>(src, dst);
    case 8: return copy_typed<uint64_t>(src, dst);
  }
}

template <class T> inline double widen(T v) { return static_cast<double>(v); }
inline double widen(BFloat16 v) { return static_cast<float>(v); }
inline double widen(Float16 v) { return static_cast<float>(v); }

template <class D, class S>
inline D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, bool>) {
    return widen(s) != 0.0;
  } else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Float16>) {
    if constexpr (std::is_same_v<S, double>) return D(static_cast<float>(s));
    else return D(static_cast<float>(widen(s)));
  } else if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Float16>) {
    return static_cast<D>(static_cast<float>(s));
  } else {
    return static_cast<D>(s);
  }
}

template <class S, class D>
void cast_to(const Tensor& src, const Tensor& dst) {
  // f32 <-> bf16 / f16 (every activation of a half model is rounded through them) on the bit
  // patterns, branch-free so that the loops vectorise; the same results as BFloat16 / Float16.
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) {
    const uint32_t* s = static_cast<const uint32_t*>(src.raw_data());
    uint16_t* d = static_cast<uint16_t*>(dst.raw_data());
    parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const uint32_t u = s[i];
        const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest, ties to even
        d[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);  // NaN stays NaN
      }
    });
    return;
  } else if constexpr (std::is_same_v<S, BFloat16> && std::is_same_v<D, float>) {
    const uint16_t* s = static_cast<const uint16_t*>(src.raw_data());
    uint32_t* d = static_cast<uint32_t*>(dst.raw_data());
    parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;
    });
    return;
  } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Float16>) {
    // Float16(float)'s three cases computed side by side and selected, so the loop vectorises.
    const float* s = static_cast<const float*>(src.raw_data());
    uint16_t* d = static_cast<uint16_t*>(dst.raw_data());
    parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const uint32_t u = f32_bits(s[i]);
        const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
        // subnormal half (or zero): the value in units of 2^-24, rounded to an integer (ties even)
        const float sub = bits_f32(a < 0x38800000u ? a : 0u) * 16777216.0f + 12582912.0f - 12582912.0f;
        const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // normal: mantissa 23 -> 10 bits, ties even
        const uint32_t normal = (((r >> 23) - 112u) << 10) | ((r >> 13) & 0x3ffu);
        const uint32_t mag = a > 0x7f800000u ? 0x7e00u                                   // NaN
                             : a >= 0x477ff000u ? 0x7c00u                                // overflow -> inf
                             : a < 0x38800000u ? static_cast<uint32_t>(static_cast<int32_t>(sub))
                                               : normal;
        d[i] = static_cast<uint16_t>(sign | mag);
      }
    });
    return;
  } else if constexpr (std::is_same_v<S, Float16> && std::is_same_v<D, float>) {
    const uint16_t* s = static_cast<const uint16_t*>(src.raw_data());
    float* d = static_cast<float*>(dst.raw_data());
    parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const uint32_t h = s[i];
        const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        const uint32_t sub = f32_bits(static_cast<float>(static_cast<int32_t>(m)) * (1.0f / 16777216.0f));
        const uint32_t normal = ((e + 112u) << 23) | (m << 13), special = 0x7f800000u | (m << 13);  // inf, NaN
        // Selected with masks: GCC does not if-convert the ternaries here.
        const uint32_t is_special = 0u - static_cast<uint32_t>(e == 31), is_sub = 0u - static_cast<uint32_t>(e == 0);
        const uint32_t bits = (normal & ~(is_special | is_sub)) | (special & is_special) | (sub & is_sub);
        d[i] = bits_f32(sign | bits);
      }
    });
    return;
  }
  const S* s = static_cast<const S*>(src.raw_data());
  D* d = static_cast<D*>(dst.raw_data());
  parallel_for(src.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) d[i] = convert<D>(s[i]);
  });
}

template <class S>
void cast_kernel(const Tensor& src, const Tensor& dst) {
  switch (dst.dtype()) {
    case DType::kF32: return cast_to<S, float>(src, dst);
    case DType::kF64: return cast_to<S, double>(src, dst);
    case DType::kBF16: return cast_to<S, BFloat16>(src, dst);
    case DType::kF16: return cast_to<S, Float16>(src, dst);
    case DType::kI32: return cast_to<S, int32_t>(src, dst);
    case DType::kI64: return cast_to<S, int64_t>(src, dst);
    case DType::kBool: return cast_to<S, bool>(src, dst);
  }
}

template <class T>
void fill_kernel(const Tensor& dst, double value) {
  T v = convert<T>(value);
  T* d = static_cast<T*>(dst.raw_data());
  if (dst.is_contiguous()) {
    parallel_for(dst.numel(), 1 << 16, [&](int64_t lo, int64_t hi) { std::fill(d + lo, d + hi, v); });
    return;
  }
  for_each_row(dst.shape(), dst.strides(), dst.strides(), [&](int64_t, int64_t, int64_t od, int64_t n, int64_t, int64_t sd) {
    for (int64_t i = 0; i < n; ++i) d[od + i * sd] = v;
  });
}

template <class T>
void add_inplace_kernel(const Tensor& dst, const Tensor& src, double alpha) {
  T* d = dst.data<T>();
  const T* s = src.data<T>();
  T a = static_cast<T>(alpha);
  parallel_for(dst.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) d[i] += a * s[i];
  });
}

template <class T>
void register_cast_for(KernelRegistry& r) {
  r.add<kernels::Cast>("cast", DeviceType::kCPU, DTypeOf<T>::value, cast_kernel<T>);
  r.add<kernels::Fill>("fill", DeviceType::kCPU, DTypeOf<T>::value, fill_kernel<T>);
  r.add<kernels::Copy>("copy", DeviceType::kCPU, DTypeOf<T>::value, copy_kernel);
}

}  // namespace

void register_copy(KernelRegistry& r) {
  register_cast_for<float>(r);
  register_cast_for<double>(r);
  register_cast_for<BFloat16>(r);
  register_cast_for<Float16>(r);
  register_cast_for<int32_t>(r);
  register_cast_for<int64_t>(r);
  register_cast_for<bool>(r);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCPU, DType::kF32, add_inplace_kernel<float>);
  r.add<kernels::AddInplace>("add_inplace", DeviceType::kCPU, DType::kF64, add_inplace_kernel<double>);
}

}  // namespace mf::cpu
