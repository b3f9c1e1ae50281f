// Array math on the widest vectors the build targets: AVX-512 (exp through vscalefps, four
// accumulators for reductions) when compiled for it, portable loops otherwise. The f64
// overloads are plain loops (f64 serves tests, not speed).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX512F__)
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized in _mm512_{min,max}_ps (its own
// undefined pass-through operand); silence it for these intrinsics only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

#include "meshflow/ops/cpu/common.h"

namespace mf::cpu {

#if defined(__AVX512F__)
// exp of 16 floats: range reduction x = n ln2 + r, Cephes polynomial for e^r, then scale by 2^n
// with vscalefps (underflows to 0 below -104 without integer tricks).
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.7f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1); }
#endif

// max of x[0..n) (n >= 1)
inline float max_array(const float* x, int64_t n) {
  int64_t i = 0;
  float m = -std::numeric_limits<float>::infinity();
#if defined(__AVX512F__)
  __m512 a0 = _mm512_set1_ps(m), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_max_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_max_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  a0 = _mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3));
  for (; i < n; i += 16) {  // the tail 16 at a time, masked (a scalar tail was 12% of attention's forward)
    const __mmask16 k = tail_mask(n - i);
    a0 = _mm512_mask_max_ps(a0, k, a0, _mm512_maskz_loadu_ps(k, x + i));
  }
  return _mm512_reduce_max_ps(a0);
#else
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
#endif
}
inline double max_array(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Writes y[i] = exp(x[i] - shift) when y is not null (y may alias x); returns their sum.
inline float exp_shift_sum(const float* x, float shift, float* y, int64_t n) {
#if defined(__AVX512F__)
  __m512 sh = _mm512_set1_ps(shift), acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {  // four independent exp chains in flight
    __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), sh));
    __m512 e2 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 32), sh));
    __m512 e3 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 48), sh));
    if (y) {
      _mm512_storeu_ps(y + i, e0);
      _mm512_storeu_ps(y + i + 16, e1);
      _mm512_storeu_ps(y + i + 32, e2);
      _mm512_storeu_ps(y + i + 48, e3);
    }
    acc0 = _mm512_add_ps(acc0, e0);
    acc1 = _mm512_add_ps(acc1, e1);
    acc2 = _mm512_add_ps(acc2, e2);
    acc3 = _mm512_add_ps(acc3, e3);
  }
  acc0 = _mm512_add_ps(acc0, acc2);
  acc1 = _mm512_add_ps(acc1, acc3);
  for (; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh));
    if (y) _mm512_mask_storeu_ps(y + i, m, e);
    acc0 = _mm512_mask_add_ps(acc0, m, acc0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#else
  float s = 0;
  for (int64_t i = 0; i < n; ++i) {
    float e = fast_exp(x[i] - shift);
    if (y) y[i] = e;
    s += e;
  }
  return s;
#endif
}
inline double exp_shift_sum(const double* x, double shift, double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    double e = std::exp(x[i] - shift);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

// y[i] = exp(x[i]) (y may alias x)
inline void exp_array(const float* x, float* y, int64_t n) {
#if defined(__AVX512F__)
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
#else
  for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
#endif
}
// y[i] = x[i] * sigmoid(a * (x[i] + c * x[i]^3)): gelu (tanh form) with a = 2 sqrt(2/pi),
// c = 0.044715; silu with a = 1, c = 0. One pass; the reciprocal is vrcp14ps refined by one
// Newton step (about 2^-28 relative), cheaper than a division.
inline void x_sigmoid_array(const float* x, float* y, int64_t n, float a, float c) {
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(-a), vc = _mm512_set1_ps(c), one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
  auto one_vec = [&](__m512 v) {
    __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(vc, v), _mm512_mul_ps(v, v), v);  // x + c x^3
    __m512 d = _mm512_add_ps(one, exp16(_mm512_mul_ps(va, inner)));                // 1 + e^{-a(...)}
    __m512 r = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(v, _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, two)));      // x r (2 - d r)
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {  // four independent vectors in flight
    __m512 y0 = one_vec(_mm512_loadu_ps(x + i)), y1 = one_vec(_mm512_loadu_ps(x + i + 16));
    __m512 y2 = one_vec(_mm512_loadu_ps(x + i + 32)), y3 = one_vec(_mm512_loadu_ps(x + i + 48));
    _mm512_storeu_ps(y + i, y0);
    _mm512_storeu_ps(y + i + 16, y1);
    _mm512_storeu_ps(y + i + 32, y2);
    _mm512_storeu_ps(y + i + 48, y3);
  }
  for (; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, one_vec(_mm512_maskz_loadu_ps(m, x + i)));
  }
#else
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + fast_exp(-a * (x[i] + c * x[i] * x[i] * x[i])));
#endif
}

inline void exp_array(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace mf::cpu

#if defined(__AVX512F__)
#pragma GCC diagnostic pop
#endif
