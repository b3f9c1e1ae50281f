// 16-bit float storage types (bf16, f16) with exact round-to-nearest-even conversions.
// On CPU these are storage formats: kernels convert to f32 to compute.
#pragma once
#include <cstdint>
#include <cstring>

namespace mf {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<uint16_t>((u >> 16) | 0x40); return; }  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    bits = static_cast<uint16_t>(u >> 16);
  }
  explicit operator float() const { return bits_f32(static_cast<uint32_t>(bits) << 16); }
};

struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) { bits = static_cast<uint16_t>(sign | 0x7e00u); return; }  // NaN
    if (a >= 0x477ff000u) { bits = static_cast<uint16_t>(sign | 0x7c00u); return; }  // overflow -> inf
    if (a < 0x38800000u) {  // subnormal half (or zero): value = m * 2^-24
      // Scale so that the half subnormal unit is 1.0, then round to nearest even via magic add.
      float v = bits_f32(a) * 16777216.0f;  // exact for these magnitudes: 2^24
      float r = v + 12582912.0f - 12582912.0f;  // 1.5*2^23 forces rounding to integer, ties-even
      bits = static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
      return;
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xfffu + mant_odd;  // round mantissa (23 -> 10 bits), ties to even
    bits = static_cast<uint16_t>(sign | (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
  }
  explicit operator float() const {
    uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) {  // zero or subnormal
      float v = static_cast<float>(m) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  }
};

}  // namespace mf
