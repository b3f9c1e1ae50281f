// How a parameter's local tensor relates to its logical tensor when the layers' weights are split
// over the ranks of one mesh dimension (tensor parallelism, Megatron's tp), in SBP terms. The
// ranks come from the layers' placement (layers/place.h); here they are a count and an index, and
// a communicator where a collective is needed.
//
// A parameter's logical tensor keeps the checkpoint (Hugging Face) layout. Its ParamLayout views
// the logical tensor as `grouped` (same elements, row-major) and splits that view over the ranks
// along `split_axis` (S(split_axis); -1: B, every rank holds the whole). The grouping is how
// GPT-2's fused QKV weight (C, 3C) keeps each head's q, k and v on one rank: viewed as
// (C, 3, H, D) it is split on the head axis, so rank r holds (C, 3, H/tp, D) = the columns of its
// heads, while gathering or slicing the checkpoint tensor stays a plain SBP conversion.
// Splits may be uneven (sbp.h's rule: the first n % p ranks hold one more row).
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/core/shape.h"
#include "meshflow/tensor/tensor.h"

namespace mf::nn {

class Module;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct ParamLayout {
  Shape logical;        // the checkpoint shape
  Shape grouped;        // a view of `logical` (same numel); empty: `logical` itself
  int split_axis = -1;  // axis of `grouped` split over tp; -1: replicated (B)

  bool replicated() const { return split_axis < 0; }
  const Shape& view() const { return grouped.empty() ? logical : grouped; }
  // This rank's piece, as a box of view(): its shape, and where it starts.
  Shape local_view_shape(int tp_size, int tp_rank) const;
  LogicalSlice local_slice(int tp_size, int tp_rank) const;
  // The local tensor's shape (the piece of view(), merged back as the logical axes allow:
  // grouped axes [split_axis - k, ...] fold into the logical axis they came from).
  Shape local_shape(int tp_size, int tp_rank) const;
};

// A replicated layout of `shape`; a split of `shape` on `axis`; a split of the grouped view.
ParamLayout replicated_layout(const Shape& shape);
ParamLayout split_layout(const Shape& shape, int axis);
ParamLayout grouped_split_layout(const Shape& logical, const Shape& grouped, int axis);

// Collective over `ranks` (the ranks splitting the weights; null: one rank): the logical tensor
// (every rank gets it) from each rank's local piece.
Tensor gather_logical(const Tensor& local, const ParamLayout& layout, comm::Communicator* ranks);
// The piece rank `rank` of `ranks` holds of a logical tensor (contiguous copy). Local.
Tensor slice_local(const Tensor& logical, const ParamLayout& layout, int ranks, int rank);

// State keyed by parameter name (a module's state dict, an optimizer's state, a checkpoint):
// `fn(tensor, layout)` applied to every entry that belongs to a parameter of `m` — named
// "<param>" or "<param>.<optimizer slot>" — other entries pass unchanged.
NamedTensors map_param_state(const Module& m, const NamedTensors& state,
                             const std::function<Tensor(const Tensor&, const ParamLayout&)>& fn);
// The pieces rank `rank` of `ranks` holds of state entries in the logical (checkpoint) layout. Local.
NamedTensors slice_local_state(const Module& m, const NamedTensors& logical, int ranks, int rank);

}  // namespace mf::nn
