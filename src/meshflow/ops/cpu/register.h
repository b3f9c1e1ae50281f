// Registration of the CPU kernels, one function per op family (ops/cpu/*.cpp).
#pragma once

namespace mf {
class KernelRegistry;

void register_cpu_kernels(KernelRegistry& r);

namespace cpu {
void register_elementwise(KernelRegistry& r);
void register_copy(KernelRegistry& r);
void register_reduce(KernelRegistry& r);
void register_gemm(KernelRegistry& r);
void register_index(KernelRegistry& r);
void register_norm(KernelRegistry& r);
void register_softmax(KernelRegistry& r);
void register_random(KernelRegistry& r);
void register_attention(KernelRegistry& r);
void register_cross_entropy(KernelRegistry& r);
void register_rope(KernelRegistry& r);
void register_optim(KernelRegistry& r);
}  // namespace cpu
}  // namespace mf
