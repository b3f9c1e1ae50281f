// What a checkpoint holds of this rank, whatever the layout: "model/<param>" and
// "optimizer/<param>.<slot>" entries, each this rank's tensor and the region of the logical
// (unsplit) tensor it holds — its tensor-parallel box and, under ZeRO, its data-parallel slice of
// that — and whether this rank writes it (a piece several ranks hold alike is written by one).
#pragma once
#include <string>
#include <vector>

#include "meshflow/models/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/parallel/grad_sync.h"
#include "meshflow/io/checkpoint.h"

namespace mf::train {

struct StateSlot {
  std::string name;
  Tensor local;
  Shape logical;
  io::TensorRegion region;
  bool writer = false;
};

// Pieces several ranks hold the same (replicated over dp, or over tp) are written by tp rank 0
// and the dp rank (parameter index mod dp); the last stage's copy of a tied parameter is the
// first stage's and is not written.
std::vector<StateSlot> state_slots(const models::Model& model, const parallel::GradSync& sync,
                                   optim::Optimizer& optimizer);

}  // namespace mf::train
