// Checks shared by the op definitions (ops/*.cpp). Internal to ops/.
#pragma once
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/ops.h"
#include "meshflow/ops/registry.h"
#include "meshflow/random/batch_slice.h"

namespace mf::detail {

inline void check_defined(const Tensor& t, const char* op, const char* what) {
  MF_CHECK(t.defined(), op, ": ", what, " is undefined");
}

inline void check_float(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  MF_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kF64, op, ": ", what, " ", t.str(),
           " must be f32 or f64 (cast bf16/f16 first)");
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  MF_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch, ", a.str(), " vs ", b.str());
  MF_CHECK(a.device() == b.device(), op, ": device mismatch, ", a.str(), " vs ", b.str());
}

inline void check_index(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  MF_CHECK(t.dtype() == DType::kI64 || t.dtype() == DType::kI32, op, ": ", what, " ", t.str(),
           " must be i32 or i64");
}

// Contiguous i64 copy of an index tensor with every value checked to lie in [0, limit).
Tensor checked_index(const Tensor& index, int64_t limit, const char* op, const char* what);

}  // namespace mf::detail
