// Temporary stubs for attention, cross-entropy and rope (being written).
#include "meshflow/ops/cpu/register.h"
#include "meshflow/ops/op_utils.h"
namespace mf {
namespace cpu {
void register_attention(KernelRegistry&) {}
void register_cross_entropy(KernelRegistry&) {}
void register_rope(KernelRegistry&) {}
}  // namespace cpu
Tensor scaled_dot_product_attention(const Tensor&, const Tensor&, const Tensor&, const AttentionOptions&) { MF_THROW("attention: pending"); }
Tensor cross_entropy(const Tensor&, const Tensor&, int64_t, double) { MF_THROW("cross_entropy: pending"); }
Tensor rope(const Tensor&, double, int64_t) { MF_THROW("rope: pending"); }
}  // namespace mf
