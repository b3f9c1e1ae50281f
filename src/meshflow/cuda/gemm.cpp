// TODO(cuda backend): cuBLASLt GEMM.
#include "meshflow/cuda/register.h"
#include "meshflow/ops/registry.h"

namespace mf::cuda {

void register_gemm(KernelRegistry&) {}

}  // namespace mf::cuda
