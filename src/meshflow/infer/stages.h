// The engine's inside (engine.cpp, beam_search.cpp): its state, where a rank sits in the decoding
// pipeline (the pipeline-stage group ordered by stage; null: one stage), and the messages from the
// last stage, where tokens are chosen, to the others.
#pragma once
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/infer/engine.h"
#include "meshflow/layers/kv_cache.h"

namespace mf::infer {

struct Engine::State {
  std::vector<layers::KvCache> caches;  // by whole-model layer; this stage's filled
  Device device = cpu_device();
  int tag = 0;  // pipeline messages of successive forwards
};

inline bool last_stage(const comm::CommPtr& pp) { return !pp || pp->rank() == pp->size() - 1; }
inline bool first_stage(const comm::CommPtr& pp) { return !pp || pp->rank() == 0; }
// `t` from the last pipeline stage to every stage (its shape and dtype known everywhere).
inline void from_last_stage(const comm::CommPtr& pp, Tensor& t) {
  if (pp && pp->size() > 1) pp->broadcast(t, pp->size() - 1)->wait();
}

}  // namespace mf::infer
