// native_half(device, dtype): whether ops compute on bf16/f16 tensors of this device directly
// (the op layer's half paths, nn/mixed_precision.h), i.e. whether every kernel those ops and
// their backwards call is registered for (device, dtype). True on CUDA; false on the CPU (no
// half kernels), where ops widen to f32 and round, and the layers simulate the rounding.
#include <array>
#include <string_view>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
// Every kernel an op may call on bf16/f16 tensors, forward or backward: products (gemm, bias:
// copy, bias gradients: reduce), elementwise ops and activations, reductions (max: scatter_add),
// in-place updates, norms, softmax, attention, dropout and random fills, rope, the embedding
// (index_select / index_add, zeros: fill), the loss, and casts (f32 losses and master weights).
constexpr std::string_view kHalfKernels[] = {
    "gemm", "copy", "cast", "fill", "binary", "unary", "activation_backward", "reduce", "add_inplace",
    "scatter_add",
    "layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward",
    "softmax", "softmax_backward",
    "attention_forward", "attention_backward",
    "dropout", "random_fill", "rope",
    "index_select", "index_add",
    "cross_entropy_forward", "cross_entropy_backward",
};
}  // namespace

bool native_half(Device device, DType dtype) {
  if (!is_half(dtype)) return false;
  // The registry is filled once (init()) and never changes after: the answers are computed once.
  using Table = std::array<std::array<bool, kNumDTypes>, kNumDeviceTypes>;
  static const Table table = [] {
    const KernelRegistry& r = kernel_registry();
    Table t{};
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      for (int k = 0; k < kNumDTypes; ++k) {
        const auto device_type = static_cast<DeviceType>(d);
        const auto dt = static_cast<DType>(k);
        bool all = true;
        for (std::string_view name : kHalfKernels) all = all && r.has(name, device_type, dt);
        t[d][k] = all;
      }
    }
    return t;
  }();
  return table[static_cast<int>(device.type)][static_cast<int>(dtype)];
}

}  // namespace mf
