// Device conversions between f32 and the bit patterns of bf16 / f16, exactly those of
// core/half.h (round to nearest even; a NaN stays a NaN with the same sign and payload bits as
// the CPU produces), for casts that must match the CPU bit for bit.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace mf::cuda {

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                                        // ties to even
  return static_cast<uint16_t>(u >> 16);
}
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {  // subnormal half (or zero): value in units of 2^-24 (exact), ties to even
    float v = __fmul_rn(__uint_as_float(a), 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rintf(v)));
  }
  a += 0xfffu + ((a >> 13) & 1u);  // mantissa 23 -> 10 bits, ties to even
  return static_cast<uint16_t>(sign | (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
}
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal
    float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));  // inf, NaN
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace mf::cuda
