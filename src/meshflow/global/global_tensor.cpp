// to_global's checks and GlobalTensor printing.
#include "meshflow/global/global_tensor.h"

#include <optional>

#include "meshflow/core/error.h"

namespace mf::global {

std::string GlobalTensor::str() const {
  std::string r = "global " + shape_str(logical_shape) + " " + (nd_sbp ? nd_sbp->str() : "(no sbp)") + " on " +
                  (placement ? placement->str() : "(no placement)");
  r += ", local " + (local.defined() ? shape_str(local.shape()) : std::string("undefined"));
  return r;
}

std::vector<int64_t> coordinate_in(const Placement& placement, int world_rank, const char* op) {
  std::optional<std::vector<int64_t>> c = placement.coordinate_of(world_rank);
  MF_CHECK(c.has_value(), op, ": rank ", world_rank, " is not in placement ", placement.str());
  return *c;
}

GlobalTensor to_global(const Tensor& local, const Placement* placement, const NdSbp* nd_sbp,
                       const Shape& logical_shape, int world_rank) {
  MF_CHECK(placement != nullptr && nd_sbp != nullptr, "to_global: placement and nd_sbp must be set (rank ",
           world_rank, ")");
  MF_CHECK(local.defined(), "to_global: undefined local tensor for logical shape ", shape_str(logical_shape), " ",
           nd_sbp->str(), " on rank ", world_rank);
  const std::vector<int64_t> coord = coordinate_in(*placement, world_rank, "to_global");
  Shape want;
  try {
    want = local_shape(logical_shape, *nd_sbp, placement->mesh_shape(), coord);
  } catch (const Error& e) {
    MF_THROW("to_global on rank ", world_rank, ": ", e.what());
  }
  MF_CHECK(local.shape() == want, "to_global: local shape ", shape_str(local.shape()), " on rank ", world_rank,
           " (mesh coordinate ", shape_str(coord), ") but logical shape ", shape_str(logical_shape), " with ",
           nd_sbp->str(), " on ", placement->str(), " prescribes ", shape_str(want));
  return GlobalTensor{placement, nd_sbp, logical_shape, local};
}

}  // namespace mf::global
