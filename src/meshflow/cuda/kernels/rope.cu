// CUDA kernel: rotary position embedding, "rotate half" layout. The cos/sin table is computed
// on the host in f64 exactly as ops/cpu/rope.cpp computes it (then rounded to f32 / f64) and
// copied to the device; the rotation runs in the table's type (f32 for bf16/f16).
#include <cmath>
#include <vector>

#include "meshflow/cuda/kernels/launch.cuh"

namespace mf::cuda {
namespace {

// x (BH, S, D) rows -> out: pairs (i, i + half) of row r rotated by the table of t = r % S.
// table: cos (S, half) then sin (S, half), sign applied to sin.
template <class T>
__global__ void rope_kernel_dev(const T* x, const Acc<T>* table, T* out, int64_t rows, int64_t S, int64_t half) {
  using A = Acc<T>;
  const int64_t D = 2 * half;
  const A* cs = table;
  const A* sn = table + S * half;
  MF_GRID_STRIDE(k, rows * half) {
    const int64_t r = k / half, i = k % half, t = r % S;
    const A c = cs[t * half + i], s = sn[t * half + i];
    const A a = to_acc(x[r * D + i]), b = to_acc(x[r * D + i + half]);
    out[r * D + i] = from_acc<T>(a * c - b * s);
    out[r * D + i + half] = from_acc<T>(b * c + a * s);
  }
}

// x (B, H, T, D) contiguous -> out: rotation by +angle (sign = 1) or its inverse (sign = -1).
template <class T>
void rope_kernel(const Tensor& x, const double* inv_freq, int64_t position_offset, int sign, const Tensor& out) {
  using A = Acc<T>;
  const char* name = "rope (cuda)";
  constexpr DType dt = dtype_of_device<T>();
  check_dtype(x, dt, name, "x");
  check_dtype(out, dt, name, "out");
  check_same_device(out, x, name, "out");
  check_contiguous(x, name, "x");
  check_contiguous(out, name, "out");
  MF_CHECK(x.ndim() == 4 && x.shape() == out.shape(), name, ": x ", x.str(), " and out ", out.str(),
           " must be one (B, H, T, D) shape");
  MF_CHECK(x.shape(3) % 2 == 0, name, ": head dim of x ", x.str(), " must be even");
  MF_CHECK(sign == 1 || sign == -1, name, ": sign must be 1 or -1, got ", sign);
  const int64_t BH = x.shape(0) * x.shape(1), S = x.shape(2), D = x.shape(3), half = D / 2;
  if (BH * S * half == 0) return;
  // The table, as the CPU kernel computes it.
  std::vector<A> table(static_cast<size_t>(2 * S * half));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double a = static_cast<double>(t + position_offset) * inv_freq[i];
      table[t * half + i] = static_cast<A>(std::cos(a));
      table[S * half + t * half + i] = static_cast<A>(sign * std::sin(a));
    }
  Tensor dtable = empty({2 * S * half}, dtype_of_device<A>(), x.device());
  copy_host_to_device(dtable.raw_data(), table.data(), table.size() * sizeof(A));
  const int64_t rows = BH * S;
  rope_kernel_dev<T><<<grid_for(rows * half, kThreads), kThreads, 0, compute_stream()>>>(
      ptr<const T>(x), ptr<const A>(dtable), ptr<T>(out), rows, S, half);
  MF_CUDA_LAUNCH_CHECK();
  // dtable is freed stream-ordered after the kernel.
}

}  // namespace

void register_rope(KernelRegistry& r) {
  r.add<kernels::Rope>("rope", DeviceType::kCUDA, DType::kF32, rope_kernel<float>);
  r.add<kernels::Rope>("rope", DeviceType::kCUDA, DType::kF64, rope_kernel<double>);
  r.add<kernels::Rope>("rope", DeviceType::kCUDA, DType::kBF16, rope_kernel<__nv_bfloat16>);
  r.add<kernels::Rope>("rope", DeviceType::kCUDA, DType::kF16, rope_kernel<__half>);
}

}  // namespace mf::cuda
