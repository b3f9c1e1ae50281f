#include "meshflow/nn/param_layout.h"

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/error.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/sbp.h"
#include "meshflow/nn/module.h"
#include "meshflow/ops/ops.h"

namespace mf::nn {

Shape ParamLayout::local_view_shape(int tp_size, int tp_rank) const {
  Shape s = view();
  if (!replicated()) s[static_cast<size_t>(split_axis)] = global::split_size(s[static_cast<size_t>(split_axis)], tp_size, tp_rank);
  return s;
}

LogicalSlice ParamLayout::local_slice(int tp_size, int tp_rank) const {
  LogicalSlice sl;
  sl.logical_shape = view();
  sl.start.assign(sl.logical_shape.size(), 0);
  if (!replicated())
    sl.start[static_cast<size_t>(split_axis)] =
        global::split_start(sl.logical_shape[static_cast<size_t>(split_axis)], tp_size, tp_rank);
  return sl;
}

Shape ParamLayout::local_shape(int tp_size, int tp_rank) const {
  if (replicated()) return logical;
  Shape lv = local_view_shape(tp_size, tp_rank);
  if (grouped.empty()) return lv;
  // `grouped` refines `logical`: consecutive grouped axes multiply to each logical axis; the
  // logical axis holding the split axis shrinks by the same factor.
  Shape out;
  size_t g = 0;
  for (int64_t n : logical) {
    int64_t full = 1, local = 1;
    do {
      MF_CHECK(g < grouped.size(), "ParamLayout: ", shape_str(grouped), " does not refine ", shape_str(logical));
      full *= grouped[g];
      local *= lv[g];
      ++g;
    } while (full < n);
    MF_CHECK(full == n, "ParamLayout: ", shape_str(grouped), " does not refine ", shape_str(logical));
    out.push_back(local);
  }
  return out;
}

ParamLayout replicated_layout(const Shape& shape) { return ParamLayout{shape, {}, -1}; }

ParamLayout split_layout(const Shape& shape, int axis) {
  MF_CHECK(axis >= 0 && axis < static_cast<int>(shape.size()), "split_layout: axis ", axis, " outside ", shape_str(shape));
  return ParamLayout{shape, {}, axis};
}

ParamLayout grouped_split_layout(const Shape& logical, const Shape& grouped, int axis) {
  MF_CHECK(shape_numel(logical) == shape_numel(grouped), "grouped_split_layout: ", shape_str(grouped),
           " is not a view of ", shape_str(logical));
  MF_CHECK(axis >= 0 && axis < static_cast<int>(grouped.size()), "grouped_split_layout: axis ", axis, " outside ",
           shape_str(grouped));
  return ParamLayout{logical, grouped, axis};
}

Tensor gather_logical(const Tensor& local, const ParamLayout& layout, comm::Communicator* ranks) {
  NoGradGuard ng;
  if (layout.replicated() || !ranks || ranks->size() == 1) return contiguous(local);
  Tensor piece = reshape(contiguous(local), layout.local_view_shape(ranks->size(), ranks->rank()));
  Tensor full = global::box_axis(piece, global::Sbp::split(layout.split_axis), global::Sbp::broadcast(), layout.view(), *ranks);
  return reshape(full, layout.logical);
}

Tensor slice_local(const Tensor& logical, const ParamLayout& layout, int ranks, int rank) {
  NoGradGuard ng;
  MF_CHECK(logical.shape() == layout.logical, "slice_local: tensor ", logical.str(), " is not of the layout's logical shape ",
           shape_str(layout.logical));
  if (layout.replicated() || ranks == 1) return contiguous(logical);
  LogicalSlice sl = layout.local_slice(ranks, rank);
  Shape lv = layout.local_view_shape(ranks, rank);
  const int64_t k = layout.split_axis;
  Tensor piece = narrow(reshape(contiguous(logical), layout.view()), k, sl.start[static_cast<size_t>(k)], lv[static_cast<size_t>(k)]);
  return reshape(contiguous(piece), layout.local_shape(ranks, rank));
}

NamedTensors map_param_state(const Module& m, const NamedTensors& state,
                             const std::function<Tensor(const Tensor&, const ParamLayout&)>& fn) {
  std::unordered_map<std::string, ParamLayout> by_name;
  const std::vector<ParamLayout> layouts = m.parameter_layouts();
  const NamedTensors named = m.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) by_name.emplace(named[i].first, layouts[i]);
  NamedTensors out;
  for (const auto& [name, t] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {  // "<param>.<optimizer slot>"
      const size_t dot = name.rfind('.');
      if (dot != std::string::npos) it = by_name.find(name.substr(0, dot));
    }
    out.emplace_back(name, it == by_name.end() ? t : fn(t, it->second));
  }
  return out;
}

NamedTensors slice_local_state(const Module& m, const NamedTensors& logical, int ranks, int rank) {
  if (ranks == 1) return logical;
  return map_param_state(m, logical, [&](const Tensor& t, const ParamLayout& l) { return slice_local(t, l, ranks, rank); });
}

}  // namespace mf::nn
