// Temporary stubs for norms and softmax (being written).
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/op_utils.h"
namespace mf {
namespace cpu {
void register_norm(KernelRegistry&) {}
void register_softmax(KernelRegistry&) {}
}  // namespace cpu
Tensor layer_norm(const Tensor&, const Tensor&, const Tensor&, double) { MF_THROW("layer_norm: pending"); }
Tensor rms_norm(const Tensor&, const Tensor&, double) { MF_THROW("rms_norm: pending"); }
Tensor softmax(const Tensor&, int64_t) { MF_THROW("softmax: pending"); }
Tensor log_softmax(const Tensor&, int64_t) { MF_THROW("log_softmax: pending"); }
}  // namespace mf
