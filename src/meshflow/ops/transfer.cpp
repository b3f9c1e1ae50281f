// Copies between devices (host <-> GPU) through the devices' allocators; differentiable.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor to(const Tensor& x, Device device) {
  detail::check_defined(x, "to", "x");
  if (x.device() == device) return x;
  MF_CHECK(x.device().type == DeviceType::kCPU || device.type == DeviceType::kCPU, "to: copy from ", x.str(),
           " to ", device.str(), ": copies between two GPUs go through the communicator, not to()");
  Tensor src = contiguous(x.detach());
  Tensor out = empty(x.shape(), x.dtype(), device);
  if (src.device().type == DeviceType::kCPU)
    allocator_for(device).copy_from_host(out.raw_data(), src.raw_data(), src.nbytes());
  else
    allocator_for(src.device()).copy_to_host(out.raw_data(), src.raw_data(), src.nbytes());
  if (is_floating(x.dtype())) {
    Device back = x.device();
    record("to", {x}, {out}, [back](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {to(g[0], back)}; });
  }
  return out;
}

}  // namespace mf
