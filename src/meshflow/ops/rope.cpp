// rope: checks, the rotation kernel, and a backward that rotates the gradient back. bf16/f16 x
// runs natively where the half kernel is registered (CUDA); the CPU refuses it.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor rope(const Tensor& x, double base, int64_t position_offset) {
  constexpr const char* kOp = "rope";
  detail::check_float(x, kOp, "x", detail::native_half(x));
  MF_CHECK(x.ndim() == 4, kOp, ": x ", x.str(), " must be (B, H, T, D)");
  MF_CHECK(x.shape(3) % 2 == 0, kOp, ": head dim of x ", x.str(), " must be even");
  MF_CHECK(base > 0.0, kOp, ": base must be > 0, got ", base);
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::Rope>("rope", x.device(), x.dtype())(xc, base, position_offset, 1, out);
  if (!any_requires_grad({x})) return out;
  record(kOp, {x}, {out}, [base, position_offset](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor gc = contiguous(g[0]);
    Tensor dx = empty(gc.shape(), gc.dtype(), gc.device());
    kernel<kernels::Rope>("rope", gc.device(), gc.dtype())(gc, base, position_offset, -1, dx);
    return {dx};
  });
  return out;
}

}  // namespace mf
