// native_half(device, dtype): whether a model stored in bf16/f16 computes on its half tensors
// directly on this device (nn/mixed_precision.h), i.e. whether every kernel its layers, loss and
// gradients call is registered for (device, dtype). True on CUDA once the half kernels are in;
// false on the CPU (no half kernels), where the layers widen to f32 and round.
#include <array>
#include <string_view>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
// The kernels of GPT-2-style models under mixed precision: projections (gemm, bias: copy),
// LayerNorm, attention, GELU (unary, activation_backward), residual adds and gradient sums
// (binary, add_inplace), sum_to (reduce), dropout, the embedding (index_select / index_add,
// zeros: fill), the loss and casts (the f32 loss, the optimizer's f32 master weights).
constexpr std::string_view kModelKernels[] = {
    "gemm", "copy", "cast", "fill", "binary", "unary", "activation_backward", "reduce", "add_inplace",
    "layer_norm", "layer_norm_backward",
    "attention_forward", "attention_backward",
    "dropout",
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
        for (std::string_view name : kModelKernels) all = all && r.has(name, device_type, dt);
        t[d][k] = all;
      }
    }
    return t;
  }();
  return table[static_cast<int>(device.type)][static_cast<int>(dtype)];
}

}  // namespace mf
