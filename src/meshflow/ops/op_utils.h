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

// Whether the op runs on the bf16/f16 tensor `t` itself (its kernels accumulating in f32):
// mf::native_half of t's device and dtype — the backend registers every half kernel the ops
// call (the CUDA backend; never the CPU).
inline bool native_half(const Tensor& t) { return t.defined() && ::mf::native_half(t.device(), t.dtype()); }

// f32 or f64; bf16/f16 too when `half_ok` (the op found its half kernels: native_half above).
inline void check_float(const Tensor& t, const char* op, const char* what, bool half_ok = false) {
  check_defined(t, op, what);
  MF_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kF64 || (half_ok && is_half(t.dtype())), op, ": ", what,
           " ", t.str(), " must be f32 or f64 (cast bf16/f16 first)");
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

// Index tensors (ops/index.cpp). Host reads of index values happen only on host copies: a GPU
// index is copied to the host first (a synchronisation), a host index is read in place.
//
// index (any device, i32/i64, any strides) -> contiguous i64 copy on the host.
Tensor host_index(const Tensor& index);
// The contiguous i64 index to hand a kernel on `device`: `index` itself (detached) when it
// already is one there, else `host` (host_index(index)) uploaded. `index` must live on the host
// or on `device`.
Tensor device_index(const Tensor& index, const Tensor& host, Device device, const char* op, const char* what);
// device_index of `index` with every value checked (on the host copy) to lie in [0, limit).
Tensor checked_index(const Tensor& index, int64_t limit, Device device, const char* op, const char* what);

}  // namespace mf::detail
