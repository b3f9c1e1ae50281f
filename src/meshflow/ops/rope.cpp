// rope: checks, the rotation kernel, and a backward that rotates the gradient back. bf16/f16 x
// runs natively where the half kernel is registered (CUDA); the CPU refuses it.
#include <algorithm>
#include <cmath>

#include "meshflow/ops/op_utils.h"

namespace mf {

std::vector<double> rope_inv_freq(int64_t head_dim, double base) {
  MF_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head dim ", head_dim, " must be even and positive");
  MF_CHECK(base > 0.0, "rope: base must be > 0, got ", base);
  std::vector<double> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  return f;
}

Tensor rope(const Tensor& x, double base, int64_t position_offset) {
  MF_CHECK(x.ndim() == 4, "rope: x ", x.str(), " must be (B, H, T, D)");
  MF_CHECK(base > 0.0, "rope: base must be > 0, got ", base);
  MF_CHECK(x.shape(3) % 2 == 0, "rope: head dim of x ", x.str(), " must be even");
  return rope(x, rope_inv_freq(x.shape(3), base), position_offset);
}

Tensor rope(const Tensor& x, const std::vector<double>& inv_freq, int64_t position_offset) {
  constexpr const char* kOp = "rope";
  detail::check_float(x, kOp, "x", detail::native_half(x));
  MF_CHECK(x.ndim() == 4, kOp, ": x ", x.str(), " must be (B, H, T, D)");
  MF_CHECK(x.shape(3) % 2 == 0, kOp, ": head dim of x ", x.str(), " must be even");
  MF_CHECK(static_cast<int64_t>(inv_freq.size()) * 2 == x.shape(3), kOp, ": ", inv_freq.size(),
           " pair frequencies for x ", x.str(), " (head dim / 2 expected)");
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::Rope>("rope", x.device(), x.dtype())(xc, inv_freq.data(), position_offset, 1, out);
  if (!any_requires_grad({x})) return out;
  record(kOp, {x}, {out}, [inv_freq, position_offset](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor gc = contiguous(g[0]);
    Tensor dx = empty(gc.shape(), gc.dtype(), gc.device());
    kernel<kernels::Rope>("rope", gc.device(), gc.dtype())(gc, inv_freq.data(), position_offset, -1, dx);
    return {dx};
  });
  return out;
}

Tensor rope(const Tensor& x, const std::vector<double>& inv_freq, const std::vector<int64_t>& row_offsets) {
  MF_CHECK(x.ndim() == 4 && static_cast<int64_t>(row_offsets.size()) == x.shape(0), "rope: ", row_offsets.size(),
           " row offsets for x ", x.str(), " (one per row of (B, H, T, D))");
  MF_CHECK(!any_requires_grad({x}), "rope: per-row positions are for inference (x ", x.str(), " requires grad)");
  if (std::all_of(row_offsets.begin(), row_offsets.end(), [&](int64_t o) { return o == row_offsets[0]; }))
    return rope(x, inv_freq, row_offsets.empty() ? 0 : row_offsets[0]);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  for (int64_t b = 0; b < x.shape(0); ++b) {
    Tensor row = narrow(out, 0, b, 1);
    copy_(row, rope(narrow(x, 0, b, 1), inv_freq, row_offsets[static_cast<size_t>(b)]));
  }
  return out;
}

}  // namespace mf
