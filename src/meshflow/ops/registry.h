// The kernel registry: (op name x device type x dtype) -> kernel function pointer.
// Backends register explicitly from init (register_cpu_kernels; the CUDA backend adds
// register_cuda_kernels) — no static initialisers, which static linking would drop.
#pragma once
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>

#include "meshflow/core/device.h"
#include "meshflow/core/dtype.h"
#include "meshflow/core/error.h"

namespace mf {

class KernelRegistry {
 public:
  template <class Fn>
  void add(std::string_view op, DeviceType device, DType dtype, Fn* fn) {
    put(op, device, dtype, reinterpret_cast<void*>(fn), typeid(Fn*));
  }
  // Throws naming op, device and dtype when nothing is registered.
  template <class Fn>
  Fn* get(std::string_view op, DeviceType device, DType dtype) const {
    return reinterpret_cast<Fn*>(find(op, device, dtype, typeid(Fn*)));
  }
  bool has(std::string_view op, DeviceType device, DType dtype) const;

 private:
  struct Entry {
    void* fn[kNumDeviceTypes][kNumDTypes] = {};
    const std::type_info* type = nullptr;
  };
  void put(std::string_view op, DeviceType device, DType dtype, void* fn, const std::type_info& type);
  void* find(std::string_view op, DeviceType device, DType dtype, const std::type_info& type) const;
  std::unordered_map<std::string, Entry> entries_;
};

// The process-wide registry, filled on first use by init().
const KernelRegistry& kernel_registry();
// Registers every backend compiled in; idempotent and thread-safe. Called by kernel_registry().
void init();

template <class Fn>
Fn* kernel(std::string_view op, Device device, DType dtype) {
  return kernel_registry().get<Fn>(op, device.type, dtype);
}

}  // namespace mf
