// A rank's place in the parallel layout, built once from the configuration (train.dist.*) and
// the world communicator, then passed down: the device mesh (one axis per named parallel
// dimension), the groups the trainer and gradient synchronisation use by name, and the layers'
// Place (the dimensions global::layer_dims() names, with sequence parallelism).
#pragma once
#include <memory>

#include "meshflow/config/config.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/layers/place.h"
#include "meshflow/parallel/groups.h"

namespace mf::parallel {

struct ParallelContext {
  std::shared_ptr<global::DeviceMesh> mesh;  // null: one process
  NamedGroups groups;
  bool sequence_parallel = false;  // train.dist.sequence_parallel
  bool context_all_to_all = false; // train.dist.context_parallel_mode == all_to_all
  comm::CommPtr layer_ranks;       // the ranks of every layer dimension (null: one)

  // Collective over `world` (null or one rank: a single process). The train.dist sizes must
  // multiply to the world size (a size 0 is derived); every group gets `timeout_seconds`
  // (train.dist.timeout, read with the other trainer options).
  static ParallelContext from_config(const Config& c, const comm::CommPtr& world, double timeout_seconds);

  // Where the model's layers live: one named dimension per global::layer_dims() entry, its
  // group from `groups`. `sequence_parallel`: whether the activations between layers are split
  // on the sequence (the run's setting; decoding turns it off).
  layers::Place layer_place(bool sequence_parallel) const;
  layers::Place layer_place() const { return layer_place(sequence_parallel); }
  int64_t pipeline_stage() const { return groups.rank("pp"); }
  int64_t pipeline_size() const { return groups.size("pp"); }
};

// Throws unless `groups` hold, for each dimension of `place`, the communicator the layers use
// (a group of one rank: none).
void check_layer_groups(const NamedGroups& groups, const layers::Place& place);

}  // namespace mf::parallel
