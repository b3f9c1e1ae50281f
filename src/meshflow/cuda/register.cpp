#include "meshflow/cuda/register.h"

#include "meshflow/ops/registry.h"

namespace mf {

void register_cuda_kernels(KernelRegistry& r) {
  cuda::register_elementwise(r);
  cuda::register_copy(r);
  cuda::register_reduce(r);
  cuda::register_gemm(r);
  cuda::register_index(r);
  cuda::register_norm(r);
  cuda::register_softmax(r);
  cuda::register_random(r);
  cuda::register_attention(r);
  cuda::register_cross_entropy(r);
  cuda::register_rope(r);
  cuda::register_optim(r);
}

}  // namespace mf
