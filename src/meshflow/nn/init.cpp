#include "meshflow/nn/init.h"

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"

namespace mf::nn {

std::vector<ParamPiece> param_pieces(const Module& m, int ranks, int rank) {
  const std::vector<ParamLayout> layouts = m.parameter_layouts();
  std::vector<ParamPiece> out;
  size_t index = 0;
  for (auto& [name, local] : m.named_parameters()) {
    const ParamLayout& layout = layouts[index++];
    out.push_back({name, view(local, layout.local_view_shape(ranks, rank)),
                   layout.replicated() ? LogicalSlice{} : layout.local_slice(ranks, rank)});
  }
  return out;
}

void normal_piece_(const ParamPiece& p, double stddev, Generator& g) {
  NoGradGuard ng;
  Tensor t = p.piece;
  if (!is_half(t.dtype())) return normal_(t, 0.0, stddev, &g, p.slice);
  Tensor wide = empty(t.shape(), DType::kF32, t.device());
  normal_(wide, 0.0, stddev, &g, p.slice);
  copy_(t, cast(wide, t.dtype()));
}

Generator param_generator(uint64_t seed, uint64_t index) {
  Generator g(seed ^ 0x5eed1d11a7e5eedULL);
  g.set_state({g.seed(), index});
  return g;
}

}  // namespace mf::nn
