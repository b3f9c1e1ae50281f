// The multi-tensor AdamW update (ops/optim_updates.cpp): every parameter of one device and
// dtype in one kernel launch, where a backend registers "adamw_multi" (CUDA). optim::AdamW
// uses it when available; elsewhere it updates one tensor at a time with adamw_update_.
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf {

// True when (device, dtype) has a registered "adamw_multi" kernel.
bool has_adamw_multi(Device device, DType dtype);
// adamw_update_(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], ..., weight_decays[i], step)
// for every i, with the same checks, in one kernel call. All tensors on one device, one dtype.
void adamw_multi_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, double lr,
                         double beta1, double beta2, double eps, const std::vector<double>& weight_decays,
                         int64_t step);

}  // namespace mf
