// Helpers shared by the CPU kernels: OpenMP chunking and vectorisable math.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "meshflow/core/dtype.h"
#include "meshflow/core/error.h"
#include "meshflow/core/shape.h"

namespace mf::cpu {

// Runs f(begin, end) over [0, n) split into one contiguous chunk per OpenMP thread, or
// inline when n <= grain or already inside a parallel region.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// Visits a strided tensor pair of one shape a row of the last axis at a time, in parallel:
// f(row, offset1, offset2, row length, last-axis stride1, last-axis stride2), offsets in elements.
template <class F>
void for_each_row(const Shape& shape, const Strides& s1, const Strides& s2, F&& f) {
  int64_t nd = static_cast<int64_t>(shape.size());
  if (nd == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{1}, int64_t{1});
    return;
  }
  int64_t inner = shape[nd - 1];
  int64_t rows = inner == 0 ? 0 : shape_numel(shape) / inner;
  parallel_for(rows, (1 << 15) / std::max<int64_t>(inner, 1), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, o1 = 0, o2 = 0;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t idx = rem % shape[d];
        rem /= shape[d];
        o1 += idx * s1[d];
        o2 += idx * s2[d];
      }
      f(row, o1, o2, inner, s1[nd - 1], s2[nd - 1]);
    }
  });
}

// exp(x) for f32 in straight-line code the compiler vectorises (Cephes polynomial, ~1 ulp);
// exactly 0 below -87.3, saturates above 88.7.
inline float fast_exp(float x) {
  float xc = std::min(std::max(x, -87.3f), 88.7f);
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return x < -87.3f ? 0.0f : p * scale;
}
inline double fast_exp(double x) { return std::exp(x); }

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + fast_exp(-x));
}

inline constexpr double kSqrt2OverPi = 0.7978845608028654;
inline constexpr double kGeluCoef = 0.044715;

}  // namespace mf::cpu
