// dtype conversion; differentiable between floating types.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor cast(const Tensor& x, DType dtype) {
  detail::check_defined(x, "cast", "x");
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), dtype, x.device());
  kernel<kernels::Cast>("cast", x.device(), x.dtype())(contiguous(x.detach()), out);
  if (is_floating(dtype) && is_floating(x.dtype())) {
    DType in_dt = x.dtype();
    record("cast", {x}, {out}, [in_dt](const std::vector<Tensor>& g) -> std::vector<Tensor> {
      return {cast(g[0], in_dt)};
    });
  }
  return out;
}

}  // namespace mf
