// What the training loop needs to know about a GPU, without CUDA headers: make it this process's
// device, its name and memory, and its dense peak FLOP/s for MFU. Compiled only with
// MESHFLOW_WITH_CUDA (callers guard with `#if MESHFLOW_WITH_CUDA`).
#pragma once
#include <cstdint>
#include <string>

#include "meshflow/core/dtype.h"

namespace mf::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;             // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int64_t total_bytes = 0;      // global memory
  int multiprocessors = 0;
  int major = 0, minor = 0;     // compute capability
};

// cudaSetDevice(index) for the calling thread (throws naming the visible count when out of range).
void use_device(int index);
// Properties of device `index` (throws when out of range).
DeviceInfo device_info(int index);
// Dense peak FLOP/s of device `index` for arithmetic in `dtype` (bf16/f16: tensor cores; f32:
// the non-tensor-core FMA rate), from a table of known parts by name; 0 when the part is unknown.
double peak_flops(int index, DType dtype);
// The peak of a part by its name (the table behind peak_flops; exposed for tests).
double peak_flops_for_name(const std::string& name, DType dtype);

}  // namespace mf::cuda
