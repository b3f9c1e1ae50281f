// Recomputation (activation checkpointing): run a function without keeping its inner
// activations, and recompute them during backward.
#pragma once
#include <functional>
#include <vector>

#include "meshflow/random/generator.h"
#include "meshflow/tensor/tensor.h"

namespace mf {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Runs fn(inputs) under no-grad, keeping only `inputs` and the generator state. In backward it
// restores that state (so dropout inside fn draws the same numbers), re-runs fn with grad
// enabled and backpropagates through it: parameters fn uses get the same gradients as
// without checkpointing, bit for bit. With grad mode on, at least one input must require grad.
// `gen` (default: the default generator) must outlive the backward pass.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, Generator* gen = nullptr);

}  // namespace mf
