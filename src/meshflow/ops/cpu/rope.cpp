// CPU kernel: rotary position embedding, "rotate half" layout. Angles and their cos/sin are
// computed in f64 once per position into a table shared by every (batch, head).
#include <vector>

#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"

namespace mf::cpu {
namespace {

// x (B, H, T, D) contiguous -> out (B, H, T, D): pairs (i, i + D/2) rotated by sign * theta,
// theta = (t + offset) * inv_freq[i].
template <class T>
void rope_kernel(const Tensor& x, const double* inv_freq, int64_t position_offset, int sign, const Tensor& out) {
  const int64_t BH = x.shape(0) * x.shape(1), S = x.shape(2), D = x.shape(3), half = D / 2;
  if (BH * S * half == 0) return;
  std::vector<T> cs(static_cast<size_t>(S * half)), sn(static_cast<size_t>(S * half));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double a = static_cast<double>(t + position_offset) * inv_freq[i];
      cs[t * half + i] = static_cast<T>(std::cos(a));
      sn[t * half + i] = static_cast<T>(sign * std::sin(a));
    }
  const T* xp = x.data<T>();
  T* op = out.data<T>();
  parallel_for(BH * S, std::max<int64_t>(1, 16384 / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % S;
      const T* xr = xp + r * D;
      T* orow = op + r * D;
      const T* c = cs.data() + t * half;
      const T* s = sn.data() + t * half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        T a = xr[i], b = xr[i + half];
        orow[i] = a * c[i] - b * s[i];
        orow[i + half] = b * c[i] + a * s[i];
      }
    }
  });
}

}  // namespace

void register_rope(KernelRegistry& r) {
  r.add<kernels::Rope>("rope", DeviceType::kCPU, DType::kF32, rope_kernel<float>);
  r.add<kernels::Rope>("rope", DeviceType::kCPU, DType::kF64, rope_kernel<double>);
}

}  // namespace mf::cpu
