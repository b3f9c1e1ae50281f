// Parameter initialisation that does not depend on the layout: each parameter is seen as the
// piece of its logical tensor this rank holds, and random initialisers draw the numbers of the
// piece's logical positions, so a split parameter gets exactly the values of the whole one.
#pragma once
#include <string>
#include <vector>

#include "meshflow/nn/module.h"
#include "meshflow/random/generator.h"

namespace mf::nn {

struct ParamPiece {
  std::string name;
  Tensor piece;        // the local tensor viewed as a box of the layout's view() (shares storage)
  LogicalSlice slice;  // where the box sits in the logical tensor (whole: replicated)
};
// Every parameter of `m`, in named_parameters() order, as rank `rank` of the `ranks` splitting
// the weights holds it.
std::vector<ParamPiece> param_pieces(const Module& m, int ranks, int rank);

// N(0, stddev) at the piece's logical positions, drawn from `g` (bf16/f16: drawn in f32, the
// same numbers as an f32 parameter, then rounded). Under no-grad.
void normal_piece_(const ParamPiece& p, double stddev, Generator& g);
// A generator of its own for parameter `index` (its place in the whole model's order): stream
// `index` of a generator seeded from `seed`, so values depend only on (seed, index, position).
Generator param_generator(uint64_t seed, uint64_t index);

}  // namespace mf::nn
