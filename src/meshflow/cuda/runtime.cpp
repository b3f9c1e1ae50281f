#include "meshflow/cuda/runtime.h"

#include <array>
#include <cstring>
#include <mutex>
#include <vector>

#include "meshflow/cuda/pinned.h"

namespace mf::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  int dev = -1;
  cudaGetDevice(&dev);
  ::mf::detail::throw_error(file, line,
                            ::mf::detail::cat(expr, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                              ") on cuda:", dev));
}

int device_count() {
  static int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" error
      return 0;
    }
    return n;
  }();
  return count;
}

void set_device(int index) {
  int n = device_count();
  MF_CHECK(index >= 0 && index < n, "cuda: device ", index, " requested but ", n, " device(s) are visible",
           n == 0 ? " (no GPU or no driver on this machine)" : " (check CUDA_VISIBLE_DEVICES and LOCAL_RANK)");
  MF_CUDA_CHECK(cudaSetDevice(index));
}

int current_device() {
  int dev = 0;
  MF_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

namespace {
constexpr int kMaxDevices = 64;
std::array<cudaStream_t, kMaxDevices> g_streams{};
std::array<int, kMaxDevices> g_sm_count{};
std::mutex g_mu;
}  // namespace

cudaStream_t compute_stream() {
  int dev = current_device();
  MF_CHECK(dev < kMaxDevices, "cuda: device index ", dev, " beyond ", kMaxDevices);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_streams[dev]) MF_CUDA_CHECK(cudaStreamCreateWithFlags(&g_streams[dev], cudaStreamNonBlocking));
  return g_streams[dev];
}

void synchronize() { MF_CUDA_CHECK(cudaStreamSynchronize(compute_stream())); }

int multiprocessor_count() {
  int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_sm_count[dev]) MF_CUDA_CHECK(cudaDeviceGetAttribute(&g_sm_count[dev], cudaDevAttrMultiProcessorCount, dev));
  return g_sm_count[dev];
}

void copy_device_to_host(void* host_dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  cudaStream_t s = compute_stream();
  MF_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, nbytes, cudaMemcpyDeviceToHost, s));
  MF_CUDA_CHECK(cudaStreamSynchronize(s));
}

void copy_host_to_device(void* dst, const void* host_src, size_t nbytes) {
  if (nbytes == 0) return;
  // Staged through a pinned block so the copy is a true asynchronous DMA; the block returns to
  // the pool once an event recorded after the copy has completed.
  PinnedBlock staging = pinned_pool().take(nbytes);
  std::memcpy(staging.data(), host_src, nbytes);
  cudaStream_t s = compute_stream();
  MF_CUDA_CHECK(cudaMemcpyAsync(dst, staging.data(), nbytes, cudaMemcpyHostToDevice, s));
  pinned_pool().give_back(std::move(staging), s);
}

void copy_device_to_device(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  MF_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, compute_stream()));
}

}  // namespace mf::cuda
