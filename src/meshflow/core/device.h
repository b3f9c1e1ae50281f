// Where a tensor's storage lives. Only CPU has kernels today; kCUDA is the slot the CUDA
// backend fills (allocator, kernels) without changing any caller.
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

}  // namespace mf
