// CPU kernels drawing from Philox: dropout (forward and backward) and random fills.
#include "meshflow/ops/cpu/common.h"
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "meshflow/random/philox.h"

namespace mf::cpu {
namespace {

// Element i keeps iff its uniform (24 bits of word i%4 of block i/4) is >= p.
template <class T>
void dropout_kernel(const Tensor& xt, const Tensor& outt, double p, uint64_t seed, uint64_t stream) {
  const T* x = xt.data<T>();
  T* out = outt.data<T>();
  int64_t n = xt.numel();
  T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  uint32_t threshold = static_cast<uint32_t>(p * 16777216.0);  // keep iff (word >> 8) >= p * 2^24
  int64_t nblocks = (n + 3) / 4;
  parallel_for(nblocks, 1 << 12, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      Philox4x32 r = philox_block(seed, stream, static_cast<uint64_t>(blk));
      int64_t base = blk * 4;
      for (int64_t l = 0; l < 4 && base + l < n; ++l)
        out[base + l] = (r.v[l] >> 8) >= threshold ? x[base + l] * keep_scale : T(0);
    }
  });
}

template <class T>
void random_fill_kernel(const Tensor& dst, bool normal, double a, double b, uint64_t seed, uint64_t stream) {
  T* d = dst.data<T>();
  parallel_for(dst.numel(), 1 << 12, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      uint64_t idx = static_cast<uint64_t>(i);
      d[i] = normal ? static_cast<T>(a + b * philox_normal(seed, stream, idx))
                    : static_cast<T>(a + (b - a) * static_cast<double>(philox_uniform(seed, stream, idx)));
    }
  });
}

}  // namespace

void register_random(KernelRegistry& r) {
  r.add<kernels::Dropout>("dropout", DeviceType::kCPU, DType::kF32, dropout_kernel<float>);
  r.add<kernels::Dropout>("dropout", DeviceType::kCPU, DType::kF64, dropout_kernel<double>);
  r.add<kernels::RandomFill>("random_fill", DeviceType::kCPU, DType::kF32, random_fill_kernel<float>);
  r.add<kernels::RandomFill>("random_fill", DeviceType::kCPU, DType::kF64, random_fill_kernel<double>);
}

}  // namespace mf::cpu
