// The backward engine: runs the graph reachable from `roots` in reverse creation order.
#pragma once
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf {

// Backpropagates grads[i] from roots[i]; accumulates into the leaves' .grad.
// Without retain_graph, every node run is released; a second pass then throws.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace mf
