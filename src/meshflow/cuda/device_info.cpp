// GPU properties and the dense peak table used for MFU.
#include "meshflow/cuda/device_info.h"

#include "meshflow/cuda/runtime.h"

namespace mf::cuda {

void use_device(int index) { set_device(index); }

DeviceInfo device_info(int index) {
  const int n = device_count();
  MF_CHECK(index >= 0 && index < n, "cuda: device ", index, " requested but ", n, " device(s) are visible");
  cudaDeviceProp prop{};
  MF_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo d;
  d.index = index;
  d.name = prop.name;
  d.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.multiprocessors = prop.multiProcessorCount;
  d.major = prop.major;
  d.minor = prop.minor;
  return d;
}

double peak_flops_for_name(const std::string& name, DType dtype) {
  // Dense (no sparsity) peaks from the vendors' data sheets, SXM parts. H200 is the H100 chip
  // with more memory: the same compute peaks.
  struct Part {
    const char* key;
    double half_tflops, f32_tflops;
  };
  static const Part kParts[] = {
      {"H200", 989.4, 67.0}, {"H100", 989.4, 67.0}, {"A100", 312.0, 19.5},
  };
  for (const Part& p : kParts)
    if (name.find(p.key) != std::string::npos)
      return 1e12 * (dtype == DType::kBF16 || dtype == DType::kF16 ? p.half_tflops : p.f32_tflops);
  return 0.0;
}

double peak_flops(int index, DType dtype) { return peak_flops_for_name(device_info(index).name, dtype); }

}  // namespace mf::cuda
