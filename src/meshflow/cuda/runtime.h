// The CUDA runtime as meshflow uses it: checked calls, the device of this process, and one
// compute stream per device on which every kernel, copy and stream-ordered free runs. Only code
// under src/meshflow/cuda (and the NCCL communicator) includes this header.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "meshflow/core/error.h"

namespace mf::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

// The number of visible devices; 0 without a driver or a GPU (never throws).
int device_count();
// Makes `index` this thread's current device (cudaSetDevice); throws naming the visible count.
void set_device(int index);
int current_device();
// The current device's compute stream (non-blocking, created on first use, never destroyed).
cudaStream_t compute_stream();
// Waits for the compute stream of the current device.
void synchronize();
// Streaming multiprocessors of the current device (cached): grid sizes of persistent kernels.
int multiprocessor_count();

// Host <-> device copies on the compute stream. Device-to-host waits for the copy (the host
// reads the bytes next); host-to-device stages pageable host memory through a pinned buffer
// and returns without waiting.
void copy_device_to_host(void* host_dst, const void* src, size_t nbytes);
void copy_host_to_device(void* dst, const void* host_src, size_t nbytes);
void copy_device_to_device(void* dst, const void* src, size_t nbytes);

// Installs the caching allocator for DeviceType::kCUDA (called once by mf::init()).
void install_allocator();

}  // namespace mf::cuda

// MF_CUDA_CHECK(cudaMalloc(...)): throws mf::Error("cudaMalloc(...) failed: out of memory ...").
#define MF_CUDA_CHECK(expr)                                                               \
  do {                                                                                    \
    cudaError_t mf_cuda_err_ = (expr);                                                    \
    if (mf_cuda_err_ != cudaSuccess) ::mf::cuda::throw_cuda_error(mf_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: reports a bad launch configuration at the launch site.
#define MF_CUDA_LAUNCH_CHECK() MF_CUDA_CHECK(cudaGetLastError())
