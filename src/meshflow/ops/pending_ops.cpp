// Temporary: op definitions being written.
#include "meshflow/ops/op_utils.h"
namespace mf {
Tensor layer_norm(const Tensor&, const Tensor&, const Tensor&, double) { MF_THROW("layer_norm: pending"); }
Tensor rms_norm(const Tensor&, const Tensor&, double) { MF_THROW("rms_norm: pending"); }
Tensor softmax(const Tensor&, int64_t) { MF_THROW("softmax: pending"); }
Tensor log_softmax(const Tensor&, int64_t) { MF_THROW("log_softmax: pending"); }
Tensor scaled_dot_product_attention(const Tensor&, const Tensor&, const Tensor&, const AttentionOptions&) { MF_THROW("attention: pending"); }
Tensor cross_entropy(const Tensor&, const Tensor&, int64_t, double) { MF_THROW("cross_entropy: pending"); }
Tensor rope(const Tensor&, double, int64_t) { MF_THROW("rope: pending"); }
}  // namespace mf
