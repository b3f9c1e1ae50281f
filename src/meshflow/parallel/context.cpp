#include "meshflow/parallel/context.h"

#include "meshflow/core/error.h"

namespace mf::parallel {

ParallelContext ParallelContext::from_config(const Config& c, const comm::CommPtr& world, double timeout) {
  ParallelContext ctx;
  ctx.sequence_parallel = c.get_bool("train.dist.sequence_parallel");
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
  return layers::Place(std::move(dims), layer_ranks, sp);
}

void check_layer_groups(const NamedGroups& groups, const layers::Place& place) {
  for (const layers::PlaceDim& d : place.dims())
    MF_CHECK(groups.ptr(d.name) == (d.comm && d.comm->size() > 1 ? d.comm : nullptr), "trainer: the groups' '", d.name,
             "' group is not the one the model's layers are placed over");
}

}  // namespace mf::parallel
