// The caching device allocator (DeviceType::kCUDA). Blocks are rounded to size classes and
// kept for reuse when freed, so steady-state training makes no cudaMalloc/cudaFree calls (both
// synchronise the device). Frees are stream-ordered: every kernel runs on the compute stream, so
// a block freed there may be handed out again at once; a block that another stream also used
// (NCCL's) is marked with record_stream() and becomes reusable only after an event recorded on
// that stream at free time has completed.
#pragma once
#include <cuda_runtime.h>

namespace mf::cuda {

// Marks the block containing `ptr` (a pointer this allocator returned) as used by `stream`.
void record_stream(const void* ptr, cudaStream_t stream);

}  // namespace mf::cuda
