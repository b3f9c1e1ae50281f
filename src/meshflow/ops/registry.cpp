#include "meshflow/ops/registry.h"

#include <mutex>

#include "meshflow/ops/cpu/register.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/register.h"
#include "meshflow/cuda/runtime.h"
#endif

namespace mf {

void KernelRegistry::put(std::string_view op, DeviceType device, DType dtype, void* fn, const std::type_info& type) {
  Entry& e = entries_[std::string(op)];
  MF_CHECK(e.type == nullptr || *e.type == type, "kernel registry: op '", op,
           "' registered with two different kernel signatures");
  e.type = &type;
  e.fn[static_cast<int>(device)][static_cast<int>(dtype)] = fn;
}

void* KernelRegistry::find(std::string_view op, DeviceType device, DType dtype, const std::type_info& type) const {
  auto it = entries_.find(std::string(op));
  MF_CHECK(it != entries_.end(), "no kernel registered for op '", op, "'");
  MF_CHECK(*it->second.type == type, "kernel registry: op '", op, "' looked up with the wrong signature");
  void* fn = it->second.fn[static_cast<int>(device)][static_cast<int>(dtype)];
  MF_CHECK(fn != nullptr, op, ": no ", device == DeviceType::kCPU ? "cpu" : "cuda", " kernel for dtype ",
           dtype_name(dtype));
  return fn;
}

bool KernelRegistry::has(std::string_view op, DeviceType device, DType dtype) const {
  auto it = entries_.find(std::string(op));
  return it != entries_.end() && it->second.fn[static_cast<int>(device)][static_cast<int>(dtype)] != nullptr;
}

namespace {
KernelRegistry& mutable_registry() {
  static KernelRegistry r;
  return r;
}
}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_kernels(mutable_registry());
#if MESHFLOW_WITH_CUDA
    // The one call site of the CUDA backend. Neither touches the driver: a machine without a
    // GPU runs the CPU backend unchanged.
    register_cuda_kernels(mutable_registry());
    cuda::install_allocator();
#endif
  });
}

const KernelRegistry& kernel_registry() {
  init();
  return mutable_registry();
}

}  // namespace mf
