#include "meshflow/parallel/context.h"

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
  return ctx;
}

nn::TensorParallel ParallelContext::tensor_parallel() const {
  nn::TensorParallel tp;
  tp.comm = groups.ptr("tp");
  tp.sequence_parallel = sequence_parallel;
  return tp;
}

}  // namespace mf::parallel
