// TODO(cuda backend): kernels of this family.
#include "meshflow/cuda/kernels/common.cuh"

namespace mf::cuda {

void register_softmax(KernelRegistry&) {}

}  // namespace mf::cuda
