// Hooks around the use of a model's parameters, unit by unit (ZeRO-3 gathers a unit's sharded
// parameters just before it runs and releases them after; parallel/zero_shards.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf::nn {

// A unit of a model's forward: the parameters (indices into Module::parameters()) it uses.
// `id` orders the units of the whole model; `chunk` is the pipeline chunk that runs it.
// `recomputed`: its forward runs inside a full recomputation (a checkpoint), whose backward is one
// of its own: the grad-ready hooks of its parameters fire there, once per such unit.
struct ParamUnit {
  int64_t id = 0;
  int64_t chunk = 0;
  std::vector<size_t> params;
  bool recomputed = false;
};

// How often each of `num_params` parameters' grad-ready hooks fire in one backward of the units:
// once per recomputed unit using it, and once for all the others together (autograd accumulates
// their gradients in one pass); at least once. A parameter several units share (T5's relative
// position bias, in every block of its stack) has its whole gradient only at its last firing.
inline std::vector<int> hook_firings(const std::vector<ParamUnit>& units, size_t num_params) {
  std::vector<int> recomputed(num_params, 0);
  std::vector<bool> plain(num_params, false);
  for (const ParamUnit& u : units)
    for (size_t k : u.params) {
      if (k >= num_params) continue;
      if (u.recomputed) ++recomputed[k];
      else plain[k] = true;
    }
  std::vector<int> out(num_params);
  for (size_t k = 0; k < num_params; ++k) out[k] = std::max(1, recomputed[k] + (plain[k] ? 1 : 0));
  return out;
}

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
