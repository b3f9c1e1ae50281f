// Registration of the CUDA kernels, one function per op family (cuda/kernels/*.cu), called once
// from mf::init() in a build with MESHFLOW_WITH_CUDA. Kernels run on cuda::compute_stream().
#pragma once

namespace mf {
class KernelRegistry;

void register_cuda_kernels(KernelRegistry& r);

namespace cuda {
void register_elementwise(KernelRegistry& r);    // kernels/elementwise.cu: binary, unary, activation backward
void register_copy(KernelRegistry& r);           // kernels/copy.cu: copy, cast, fill, add_, where
void register_reduce(KernelRegistry& r);         // kernels/reduce.cu
void register_gemm(KernelRegistry& r);           // gemm.cpp: cuBLASLt
void register_index(KernelRegistry& r);          // kernels/index.cu: index_select/add, gather/scatter_add
void register_norm(KernelRegistry& r);           // kernels/norm.cu: layer norm, rms norm
void register_softmax(KernelRegistry& r);        // kernels/softmax.cu
void register_random(KernelRegistry& r);         // kernels/random.cu: dropout, random fill (Philox)
void register_attention(KernelRegistry& r);      // kernels/attention.cu: flash attention
void register_cross_entropy(KernelRegistry& r);  // kernels/cross_entropy.cu
void register_rope(KernelRegistry& r);           // kernels/rope.cu
void register_optim(KernelRegistry& r);          // kernels/optim.cu: AdamW, SGD
}  // namespace cuda
}  // namespace mf
