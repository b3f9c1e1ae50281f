// Boxing: converting a global tensor from one NdSbp to another on the same placement, one mesh
// axis at a time, each on that axis's communicator (see GLOBAL_VIEW.md for the cost table).
//
// Per mesh axis (p ranks, r = this rank's index on that axis):
//   P -> B      all_reduce                     backward: P -> B (all_reduce)
//   P -> S(k)   reduce_scatter                 backward: S(k) -> B (all_gather)
//   S(k) -> B   all_gather                     backward: P -> S(k) (reduce_scatter)
//   S(i)->S(j)  all_to_all                     backward: S(j) -> S(i) (all_to_all)
//   B -> S(k)   local slice                    backward: S(k) -> P (zero padding)
//   S(k) -> P   local zero padding             backward: B -> S(k) (local slice)
//   B -> P      rank 0 keeps it, others zeros  backward: B -> P
// Backward is the conversion between the dual SBPs (S <-> S, B <-> P): a local gradient is the
// exact partial derivative of the SUM of all ranks' local losses. So the gradient of a P -> B
// all-reduce is itself an all-reduce of the arriving gradients: a loss counted once must be
// computed on one rank (or divided by the group size), not repeated on every rank.
// Every split may be uneven (the first n % p ranks hold one more row): collectives pad each block
// to the largest and cut after. Splits of axes other than 0 are permuted to the front and back.
//
// An N-d conversion runs in a fixed order, the same on every rank: first the axes whose target
// is B or P, innermost mesh axis first; then the axes whose target is a split, outermost first.
// A step on mesh axis m that involves a split of tensor axis k while an inner mesh axis (> m)
// also splits k (nested splits, e.g. (S(0), S(0)) -> (S(1), S(0))) is not yet supported: the
// whole conversion is checked before any communication and throws mf::Error on every rank.
//
// Collective: every rank of the placement must call box_to with the same arguments in the same
// order, and run backward through it; the communicators must outlive the backward pass.
#pragma once
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/global/global_tensor.h"

namespace mf::global {

// axis_comms[m]: the ranks that differ from this one only along mesh axis m, ordered by that
// index (size == mesh_size(m), rank() == this rank's coordinate on m). Differentiable through
// the local tensor. Returns x itself when target == x.nd_sbp.
GlobalTensor box_to(const GlobalTensor& x, const NdSbp* target, const std::vector<comm::Communicator*>& axis_comms);
// A 1-D placement: `comm` spans it.
GlobalTensor box_to(const GlobalTensor& x, const NdSbp* target, comm::Communicator& comm);

// One step of an N-d conversion: mesh axis `mesh_axis` goes from `from` to `to`.
struct BoxStep {
  int mesh_axis = 0;
  Sbp from;
  Sbp to;
};
// The fixed plan box_to runs from `from` to `to` (see above; empty when equal). Throws mf::Error
// ("not yet supported ... nested splits", naming both NdSbps) when a step needs nested splits.
// Depends only on the two NdSbps, so it is the same on every rank and needs no communication.
std::vector<BoxStep> box_plan(const NdSbp& from, const NdSbp& to);
// Whether box_plan(from, to) succeeds, without throwing.
bool box_supported(const NdSbp& from, const NdSbp& to);

// One step: converts `x`, this rank's piece of a group tensor of `group_shape` spread over
// `comm` as `from`, to its piece as `to`. Differentiable (record()); from == to returns x.
Tensor box_axis(const Tensor& x, const Sbp& from, const Sbp& to, const Shape& group_shape, comm::Communicator& comm);

}  // namespace mf::global
