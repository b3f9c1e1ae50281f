// A rank's place in the parallel layout, built once from the configuration (train.dist.*) and
// the world communicator, then passed down: the device mesh (one axis per named parallel
// dimension), the groups the trainer and gradient synchronisation use by name, and the
// tensor-parallel group (with sequence parallelism) the model's layers use.
#pragma once
#include <memory>

#include "meshflow/config/config.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/nn/tensor_parallel.h"
#include "meshflow/parallel/groups.h"

namespace mf::parallel {

struct ParallelContext {
  std::shared_ptr<global::DeviceMesh> mesh;  // null: one process
  NamedGroups groups;
  bool sequence_parallel = false;  // train.dist.sequence_parallel

  // Collective over `world` (null or one rank: a single process). The train.dist sizes must
  // multiply to the world size (a size 0 is derived); every group gets `timeout_seconds`
  // (train.dist.timeout, read with the other trainer options).
  static ParallelContext from_config(const Config& c, const comm::CommPtr& world, double timeout_seconds);

  // The group the model's split layers use (size 1: none).
  nn::TensorParallel tensor_parallel() const;
  int64_t pipeline_stage() const { return groups.rank("pp"); }
  int64_t pipeline_size() const { return groups.size("pp"); }
};

}  // namespace mf::parallel
