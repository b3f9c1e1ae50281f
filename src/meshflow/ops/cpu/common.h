// Helpers shared by the CPU kernels: OpenMP chunking and vectorisable math.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "meshflow/core/dtype.h"
#include "meshflow/core/error.h"

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
