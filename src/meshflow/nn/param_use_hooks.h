// Hooks around the use of a model's parameters, unit by unit (ZeRO-3 gathers a unit's sharded
// parameters just before it runs and releases them after; parallel/zero_shards.h).
#pragma once
#include <cstdint>
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf::nn {

// A unit of a model's forward: the parameters (indices into Module::parameters()) it uses.
// `id` orders the units of the whole model; `chunk` is the pipeline chunk that runs it.
struct ParamUnit {
  int64_t id = 0;
  int64_t chunk = 0;
  std::vector<size_t> params;
};

class ParamUseHooks {
 public:
  virtual ~ParamUseHooks() = default;
  // Before unit `unit` runs its forward.
  virtual void enter(int64_t unit) = 0;
  // After it; `out` is the unit's output. Returns the tensor the model continues with: `out`, or
  // an alias whose backward calls back before the unit's backward runs.
  virtual Tensor leave(int64_t unit, const Tensor& out) = 0;
};

}  // namespace mf::nn
