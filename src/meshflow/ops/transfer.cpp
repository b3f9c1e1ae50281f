// Copies between devices (host <-> GPU) through the devices' allocators; differentiable.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor to(const Tensor& x, Device device) {
  detail::check_defined(x, "to", "x");
  if (x.device() == device) return x;
  Tensor src = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype(), device);
  copy_bytes(device, out.raw_data(), src.device(), src.raw_data(), src.nbytes());
  if (is_floating(x.dtype())) {
    Device back = x.device();
    record("to", {x}, {out}, [back](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {to(g[0], back)}; });
  }
  return out;
}

}  // namespace mf
