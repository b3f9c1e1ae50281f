#include "meshflow/train/state_slots.h"

#include <unordered_map>

#include "meshflow/global/sbp.h"

namespace mf::train {

namespace {
// This rank's tensor-parallel box of a parameter's logical tensor (all of it when not split).
io::TensorRegion tp_box(const nn::ParamLayout& l, const layers::Place& tp) {
  io::TensorRegion r = io::TensorRegion::whole(l.logical);
  if (tp.size() == 1 || l.replicated()) return r;
  r.view = l.view();
  r.axis = l.split_axis;
  const int64_t n = r.view[static_cast<size_t>(r.axis)];
  r.start = global::split_start(n, tp.size(), tp.rank());
  r.length = global::split_size(n, tp.size(), tp.rank());
  return r;
}

io::TensorRegion slice_of(io::TensorRegion r, const parallel::ParamShard& z) {
  r.flat_start = z.start;
  r.flat_length = z.numel;
  return r;
}
}  // namespace

std::vector<StateSlot> state_slots(const models::Model& model, const parallel::GradSync& sync,
                                   optim::Optimizer& optimizer) {
  const layers::Place& tp = model.place();  // its weights' split
  const int64_t dpn = sync.groups().size("dp"), dpr = sync.groups().rank("dp");
  const auto named = model.named_parameters();
  const auto layouts = model.parameter_layouts();
  std::unordered_map<std::string, size_t> index;
  for (size_t k = 0; k < named.size(); ++k) index.emplace(named[k].first, k);
  auto writes = [&](size_t k, bool sliced) {
    const bool tp_writer = layouts[k].replicated() ? tp.rank() == 0 : true;
    return tp_writer && !sync.tied_copy(k) && (sliced || static_cast<int64_t>(k) % dpn == dpr);
  };
  std::vector<StateSlot> slots;
  for (size_t k = 0; k < named.size(); ++k) {
    const io::TensorRegion box = tp_box(layouts[k], tp);
    const parallel::ParamShard* z = sync.shard_of(k);
    if (sync.params_sliced())
      slots.push_back({"model/" + named[k].first, z->shard, layouts[k].logical, slice_of(box, *z), writes(k, true)});
    else
      slots.push_back({"model/" + named[k].first, named[k].second, layouts[k].logical, box, writes(k, false)});
  }
  for (const auto& [name, t] : optimizer.state_tensors()) {
    const size_t dot = name.rfind('.');
    auto it = dot == std::string::npos ? index.end() : index.find(name.substr(0, dot));
    MF_CHECK(it != index.end(), "checkpoint: optimizer state '", name, "' belongs to no parameter");
    const size_t k = it->second;
    const io::TensorRegion box = tp_box(layouts[k], tp);
    const parallel::ParamShard* z = sync.shard_of(k);
    slots.push_back({"optimizer/" + name, t, layouts[k].logical, z ? slice_of(box, *z) : box, writes(k, z != nullptr)});
  }
  return slots;
}

}  // namespace mf::train
