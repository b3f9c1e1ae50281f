#include "meshflow/core/dtype.h"

#include "meshflow/core/error.h"

namespace mf {

size_t dtype_nbytes(DType dt) {
  switch (dt) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
  }
  MF_THROW("dtype_nbytes: invalid dtype ", static_cast<int>(dt));
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
  }
  return "invalid";
}

bool is_floating(DType dt) {
  return dt == DType::kF32 || dt == DType::kF64 || dt == DType::kBF16 || dt == DType::kF16;
}

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  MF_THROW("unknown dtype '", name, "' (expected f32, f64, bf16, f16, i32, i64 or bool)");
}

}  // namespace mf
