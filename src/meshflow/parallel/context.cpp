#include "meshflow/parallel/context.h"

#include "meshflow/core/error.h"

namespace mf::parallel {

ParallelContext ParallelContext::from_config(const Config& c, const comm::CommPtr& world, double timeout) {
  ParallelContext ctx;
  ctx.sequence_parallel = c.get_bool("train.dist.sequence_parallel");
  const std::string mode = c.get_string("train.dist.context_parallel_mode");
  MF_CHECK(mode == "ring" || mode == "all_to_all", "train.dist.context_parallel_mode: '", mode,
           "' is not one of ring, all_to_all");
  ctx.context_all_to_all = mode == "all_to_all";
  MF_CHECK(!ctx.context_all_to_all || c.get_int("train.dist.context_parallel_size") == 1 ||
               c.get_int("train.dist.tensor_parallel_size") == 1,
           "train.dist.context_parallel_mode=all_to_all with train.dist.tensor_parallel_size ",
           c.get_int("train.dist.tensor_parallel_size"),
           ": the heads would be split over both (nested splits are not boxed yet); use context_parallel_mode=ring");
  if (!world || world->size() == 1) return ctx;
  world->set_timeout_seconds(timeout);
  ctx.mesh = std::make_shared<global::DeviceMesh>(global::DeviceMesh::from_config(c, *world));
  const global::DeviceMesh& m = *ctx.mesh;
  std::vector<std::pair<std::string, comm::CommPtr>> named;
  for (size_t d = 0; d < m.dims().count(); ++d) named.emplace_back(m.dims().name(d), m.comm_ptr(m.dims().name(d)));
  // This stage's ranks (every dimension but pp): the world without pipeline parallelism.
  std::vector<std::string> stage;
  for (size_t d = 0; d < m.dims().count(); ++d)
    if (std::string(m.dims().name(d)) != "pp") stage.emplace_back(m.dims().name(d));
  named.emplace_back("stage", m.size("pp") > 1 ? m.split_over(*world, stage) : world);
  // The ranks holding the same piece of every parameter: their gradients are partial sums over cp
  // (each cp rank computes the loss's gradient for its slice of the sequences), averaged over dp.
  named.emplace_back("dp_cp", m.size("cp") > 1 ? m.split_over(*world, {"dp", "cp"}) : m.comm_ptr("dp"));
  named.emplace_back("world", world);
  ctx.groups = make_groups(named, timeout);
  const std::vector<std::string> layer = global::layer_dims();
  int64_t layer_size = 1;
  for (const std::string& d : layer) layer_size *= m.size(d);
  if (layer_size > 1) {
    ctx.layer_ranks = layer.size() == 1 ? ctx.groups.ptr(layer[0]) : m.split_over(*world, layer);
    ctx.layer_ranks->set_timeout_seconds(timeout);
  }
  return ctx;
}

layers::Place ParallelContext::layer_place(bool sp) const {
  std::vector<layers::PlaceDim> dims;
  for (const std::string& d : global::layer_dims()) dims.push_back({d, groups.ptr(d)});
  layers::Place place(std::move(dims), layer_ranks, sp);
  place.set_sequence_to_heads(context_all_to_all);
  return place;
}

void check_layer_groups(const NamedGroups& groups, const layers::Place& place) {
  for (const layers::PlaceDim& d : place.dims())
    MF_CHECK(groups.ptr(d.name) == (d.comm && d.comm->size() > 1 ? d.comm : nullptr), "trainer: the groups' '", d.name,
             "' group is not the one the model's layers are placed over");
}

}  // namespace mf::parallel
