#include "meshflow/ops/cpu/register.h"

#include "meshflow/ops/registry.h"

namespace mf {

void register_cpu_kernels(KernelRegistry& r) {
  cpu::register_elementwise(r);
  cpu::register_copy(r);
  cpu::register_reduce(r);
  cpu::register_gemm(r);
  cpu::register_index(r);
  cpu::register_norm(r);
  cpu::register_softmax(r);
  cpu::register_random(r);
  cpu::register_attention(r);
  cpu::register_cross_entropy(r);
  cpu::register_rope(r);
  cpu::register_optim(r);
}

}  // namespace mf
