// Temporary: families whose kernels are being written register nothing yet.
#include "meshflow/ops/cpu/register.h"
namespace mf::cpu {
void register_norm(KernelRegistry&) {}
void register_softmax(KernelRegistry&) {}
void register_attention(KernelRegistry&) {}
void register_cross_entropy(KernelRegistry&) {}
void register_rope(KernelRegistry&) {}
}  // namespace mf::cpu
