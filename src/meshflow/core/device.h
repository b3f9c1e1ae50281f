// Where a tensor's storage lives: the host (kCPU) or a GPU (kCUDA, filled by the CUDA backend
// in src/meshflow/cuda when the build has it: allocator, kernels, copies).
#pragma once
#include <cstdint>
#include <string>

namespace mf {

enum class DeviceType : uint8_t { kCPU = 0, kCUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const { return (type == DeviceType::kCPU ? "cpu:" : "cuda:") + std::to_string(index); }
};

inline Device cpu_device() { return Device{DeviceType::kCPU, 0}; }
inline Device cuda_device(int index = 0) { return Device{DeviceType::kCUDA, index}; }

// Whether this build has the CUDA backend (MESHFLOW_WITH_CUDA). Both are defined by the backend
// layer (ops/backends.cpp), so core includes no backend.
bool cuda_backend_compiled();
// The GPUs this process sees: 0 without the backend, a driver or a GPU (never throws).
int cuda_device_count();

}  // namespace mf
