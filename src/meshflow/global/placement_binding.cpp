// The communicators of bound placements (see global_ops.h, "placements bound to communicators").
#include <map>
#include <mutex>
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/global_ops.h"

namespace mf::global {

namespace {

struct Bound {
  uint64_t id = 0;
  GlobalContext ctx;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
// Per placement, its live bindings in the order they were made; the newest is used.
std::map<const Placement*, std::vector<Bound>>& registry() {
  static std::map<const Placement*, std::vector<Bound>> r;
  return r;
}
uint64_t next_id = 1;

}  // namespace

PlacementBinding::PlacementBinding(const Placement* placement, std::vector<comm::Communicator*> axis_comms,
                                   int world_rank)
    : placement_(placement) {
  MF_CHECK(placement != nullptr, "PlacementBinding: no placement");
  MF_CHECK(static_cast<int>(axis_comms.size()) == placement->ndim(), "PlacementBinding: ", axis_comms.size(),
           " communicators for the ", placement->ndim(), " mesh axes of ", placement->str());
  for (int m = 0; m < placement->ndim(); ++m) {
    const comm::Communicator* c = axis_comms[static_cast<size_t>(m)];
    MF_CHECK(placement->mesh_size(m) == 1 || (c != nullptr && c->size() == placement->mesh_size(m)),
             "PlacementBinding: mesh axis ", m, " of ", placement->str(), " needs a communicator of ",
             placement->mesh_size(m), " ranks");
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  id_ = next_id++;
  registry()[placement].push_back(Bound{id_, GlobalContext{std::move(axis_comms), world_rank}});
}

PlacementBinding::~PlacementBinding() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(placement_);
  if (it == registry().end()) return;
  auto& v = it->second;
  for (auto b = v.begin(); b != v.end(); ++b)
    if (b->id == id_) {
      v.erase(b);
      break;
    }
  if (v.empty()) registry().erase(it);
}

GlobalContext context_of(const Placement* placement) {
  MF_CHECK(placement != nullptr, "global op: an input without a placement");
  if (placement->size() == 1)
    return GlobalContext{std::vector<comm::Communicator*>(static_cast<size_t>(placement->ndim()), nullptr),
                         placement->ranks()[0]};
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(placement);
  MF_CHECK(it != registry().end() && !it->second.empty(), "global op on ", placement->str(),
           ": no communicators are bound to this placement (a PlacementBinding must live while its tensors are used)");
  return it->second.back().ctx;
}

GlobalTensor box(const GlobalTensor& x, const NdSbp* target) {
  MF_CHECK(x.placement != nullptr && target != nullptr, "box: ", x.str(), " to a missing SBP");
  if (x.nd_sbp == target) return x;
  if (x.placement->size() == 1) return GlobalTensor{x.placement, target, x.logical_shape, x.local};
  return box_to(x, target, context_of(x.placement).axis_comms);
}

const NdSbp* uniform_sbp(const Placement* placement, const Sbp& sbp) {
  return nd_sbp(std::vector<Sbp>(static_cast<size_t>(placement->ndim()), sbp));
}

GlobalTensor broadcast_beside(const GlobalTensor& like, const Tensor& t) {
  return GlobalTensor{like.placement, uniform_sbp(like.placement, Sbp::broadcast()), t.shape(), to(t, like.local.device())};
}

}  // namespace mf::global
