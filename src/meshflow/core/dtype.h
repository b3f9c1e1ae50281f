// Element types. Compute kernels on CPU exist for f32 and f64 (f64 serves exact gradient
// checks); bf16 and f16 are storage types reached through cast; i32/i64/bool index and mask.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "meshflow/core/half.h"

namespace mf {

enum class DType : uint8_t { kF32 = 0, kF64, kBF16, kF16, kI32, kI64, kBool };
inline constexpr int kNumDTypes = 7;

size_t dtype_nbytes(DType dt);  // bytes per element
const char* dtype_name(DType dt);
bool is_floating(DType dt);
DType dtype_from_name(const std::string& name);  // "f32", "bf16", ... throws on unknown
// The 16-bit float storage types (bf16, f16).
inline bool is_half(DType dt) { return dt == DType::kBF16 || dt == DType::kF16; }
// The dtype a tensor of `dt` is computed in: f32 for bf16/f16 (no CPU kernels), else itself.
inline DType compute_dtype(DType dt) { return is_half(dt) ? DType::kF32 : dt; }

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

}  // namespace mf
