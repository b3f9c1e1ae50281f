// CPU kernels: sum and max over the middle axis of an (outer, r, inner) view.
#include <limits>
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

using kernels::ReduceOp;
constexpr int64_t kTile = 64;

template <class T>
void reduce_kernel(ReduceOp op, const Tensor& xt, int64_t outer, int64_t r, int64_t inner, const Tensor& outt,
                   const Tensor& argt) {
  const T* x = xt.data<T>();
  T* out = outt.data<T>();
  int64_t* arg = op == ReduceOp::kMax ? argt.data<int64_t>() : nullptr;
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(r, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const T* row = x + o * r;
        if (op == ReduceOp::kSum) {
          double acc = 0.0;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < r; ++j) acc += static_cast<double>(row[j]);
          out[o] = static_cast<T>(acc);
        } else if (op == ReduceOp::kSumSquares) {
          double acc = 0.0;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < r; ++j) acc += static_cast<double>(row[j]) * static_cast<double>(row[j]);
          out[o] = static_cast<T>(acc);
        } else {
          T best = row[0];
          int64_t bi = 0;
          for (int64_t j = 1; j < r; ++j)
            if (row[j] > best) { best = row[j]; bi = j; }
          out[o] = best;
          arg[o] = bi;
        }
      }
    });
    return;
  }
  MF_CHECK(op != ReduceOp::kSumSquares, "reduce: sum of squares is implemented over the last axis only");
  int64_t ntiles = (inner + kTile - 1) / kTile;
  parallel_for(outer * ntiles, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(r * kTile, 1)),
               [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / ntiles, i0 = (t % ntiles) * kTile, n = std::min(kTile, inner - i0);
      const T* base = x + o * r * inner + i0;
      T* dst = out + o * inner + i0;
      if (op == ReduceOp::kSum) {
        double acc[kTile] = {};
        for (int64_t j = 0; j < r; ++j) {
          const T* row = base + j * inner;
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<double>(row[i]);
        }
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(acc[i]);
      } else {
        int64_t* adst = arg + o * inner + i0;
        for (int64_t i = 0; i < n; ++i) { dst[i] = base[i]; adst[i] = 0; }
        for (int64_t j = 1; j < r; ++j) {
          const T* row = base + j * inner;
          for (int64_t i = 0; i < n; ++i)
            if (row[i] > dst[i]) { dst[i] = row[i]; adst[i] = j; }
        }
      }
    }
  });
}

}  // namespace

void register_reduce(KernelRegistry& r) {
  r.add<kernels::Reduce>("reduce", DeviceType::kCPU, DType::kF32, reduce_kernel<float>);
  r.add<kernels::Reduce>("reduce", DeviceType::kCPU, DType::kF64, reduce_kernel<double>);
}

}  // namespace mf::cpu
