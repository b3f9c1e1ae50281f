// GlobalTensor: a tensor of the global view — a placement, an NdSbp (one Sbp per mesh axis), the
// logical shape the model code sees, and this rank's local piece (see GLOBAL_VIEW.md). A small
// value type: copying it shares the local tensor, which carries the autograd history.
//
// Gradients of the local pieces are the exact partial derivatives of the sum of the ranks' local
// losses. In global terms the gradient of a piece with SBP S(k) is S(k), of B is P and of P is B
// (OneFlow's dual SBP), which is what boxing's backward produces (boxing.h).
#pragma once
#include <string>
#include <vector>

#include "meshflow/core/shape.h"
#include "meshflow/global/placement.h"
#include "meshflow/global/sbp.h"
#include "meshflow/tensor/tensor.h"

namespace mf::global {

struct GlobalTensor {
  const Placement* placement = nullptr;
  const NdSbp* nd_sbp = nullptr;
  Shape logical_shape;
  Tensor local;  // this rank's piece; its shape is local_shape(logical_shape, *nd_sbp, ...)

  std::string str() const;  // "global (7, 5) (S(0)) on cpu:[0,1] as (2), local (4, 5)"
};

// Wraps `local` (kept as is, autograd included) as this rank's piece. Throws mf::Error naming the
// op, the shapes, the SBP, the placement and the rank when `world_rank` is not in the placement,
// the NdSbp does not fit the mesh or the logical shape, or local's shape is not the one the SBP
// prescribes for this rank. Local: no communication.
GlobalTensor to_global(const Tensor& local, const Placement* placement, const NdSbp* nd_sbp,
                       const Shape& logical_shape, int world_rank);

// This rank's piece (the same tensor, autograd included).
inline Tensor to_local(const GlobalTensor& g) { return g.local; }

// The mesh coordinate of `world_rank` in `placement`; throws naming `op` when it is not a member.
std::vector<int64_t> coordinate_in(const Placement& placement, int world_rank, const char* op);

}  // namespace mf::global
