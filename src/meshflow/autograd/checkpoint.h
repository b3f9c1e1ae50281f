// Recomputation (activation checkpointing): run a function without keeping its inner
// activations, and recompute them during backward.
#pragma once
#include <functional>
#include <vector>

#include "meshflow/random/generator.h"
#include "meshflow/tensor/tensor.h"

namespace mf {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Runs fn(inputs) under no-grad, keeping only `inputs`, the generator state and the batch slice
// (random/batch_slice.h). In backward it restores both (so dropout inside fn draws the same
// numbers, whatever slice guard is live during backward), re-runs fn with grad enabled and
// backpropagates through it: parameters fn uses get the same gradients as without
// checkpointing, bit for bit. A parameter passed as an input gets its gradient through this
// node's edge (the caller's graph sums it with its other uses, as without checkpointing); one
// only captured by fn gets it inside the recompute's backward. With grad mode on, at least one input must require grad.
// `gen` (default: the default generator) must outlive the backward pass.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, Generator* gen = nullptr);

}  // namespace mf
