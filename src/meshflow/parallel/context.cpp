#include "meshflow/parallel/context.h"

namespace mf::parallel {

ParallelContext ParallelContext::from_config(const Config& c, const comm::CommPtr& world, double timeout) {
  ParallelContext ctx;
  ctx.sequence_parallel = c.get_bool("train.dist.sequence_parallel");
  if (!world || world->size() == 1) return ctx;
  world->set_timeout_seconds(timeout);
  ctx.mesh = std::make_shared<global::DeviceMesh>(global::DeviceMesh::from_config(c, *world));
  const global::DeviceMesh& m = *ctx.mesh;
  // This stage's dp x tp ranks: the world without pipeline parallelism.
  comm::CommPtr stage_group = world;
  if (m.axis_size(global::Axis::kPipeline) > 1)
    stage_group = world->split(static_cast<int>(m.index(global::Axis::kPipeline)), world->rank());
  ctx.groups = make_groups(m.comm_ptr(global::Axis::kData), m.comm_ptr(global::Axis::kTensor), stage_group,
                           m.comm_ptr(global::Axis::kPipeline), world, timeout);
  return ctx;
}

nn::TensorParallel ParallelContext::tensor_parallel() const {
  nn::TensorParallel tp;
  tp.comm = groups.tp;
  tp.sequence_parallel = sequence_parallel;
  return tp;
}

}  // namespace mf::parallel
