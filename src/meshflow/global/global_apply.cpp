// The common path of every global op: check the inputs share a placement, infer the signature
// (cached), box the inputs, run the local op, wrap the outputs (see global_ops.h).
#include <utility>

#include "meshflow/core/error.h"
#include "meshflow/core/trace.h"
#include "meshflow/global/boxing.h"
#include "meshflow/global/global_ops.h"

namespace mf::global {

GlobalContext global_context(const DeviceMesh& mesh, int world_rank) { return {mesh.comms(), world_rank}; }

namespace {

void check_inputs(const std::string& op, const std::vector<GlobalTensor>& inputs, int world_rank) {
  MF_CHECK(!inputs.empty(), "global ", op, ": no inputs (rank ", world_rank, ")");
  const Placement* pl = inputs[0].placement;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GlobalTensor& x = inputs[i];
    MF_CHECK(x.placement != nullptr && x.nd_sbp != nullptr && x.local.defined(), "global ", op, ": input ", i,
             " is not a global tensor (rank ", world_rank, ")");
    MF_CHECK(x.placement == pl, "global ", op, ": input ", i, " is on ", x.placement->str(), ", input 0 on ",
             pl->str(), "; box to one placement first (rank ", world_rank, ")");
  }
}

// A placement of one rank: every SBP is the whole tensor, so the op is its local op (no
// inference, no boxing) and the outputs are B.
std::vector<GlobalTensor> apply_on_one_rank(const GlobalContext& ctx, const std::string& op,
                                            const std::vector<GlobalTensor>& inputs,
                                            const std::vector<Shape>& output_shapes, const PlacedLocalFn& local) {
  const Placement* pl = inputs[0].placement;
  const NdSbp* b = uniform_sbp(pl, Sbp::broadcast());
  NdSignature sig;
  sig.inputs.assign(inputs.size(), b);
  sig.outputs.assign(output_shapes.size(), b);
  const std::vector<int64_t> coord(static_cast<size_t>(pl->ndim()), 0);
  std::vector<Tensor> pieces;
  pieces.reserve(inputs.size());
  for (const GlobalTensor& x : inputs) pieces.push_back(x.local);
  std::vector<Tensor> outs = local(pieces, LocalCall{sig, coord, ctx});
  MF_CHECK(outs.size() == output_shapes.size(), "global ", op, ": the local op gave ", outs.size(), " outputs, ",
           output_shapes.size(), " expected");
  std::vector<GlobalTensor> r;
  r.reserve(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    MF_CHECK(outs[o].shape() == output_shapes[o], "global ", op, ": local output ", outs[o].str(), " on one rank, ",
             "logical ", shape_str(output_shapes[o]), " expected");
    r.push_back(GlobalTensor{pl, b, output_shapes[o], outs[o]});
  }
  return r;
}

// A profiled op's arguments: the logical shapes of its inputs.
std::string shapes_arg(const std::vector<GlobalTensor>& inputs) {
  std::string s;
  for (const GlobalTensor& x : inputs) {
    if (!s.empty()) s += ' ';
    s += shape_str(x.logical_shape);
  }
  return "\"shapes\":" + trace::json_string(s);
}

}  // namespace

std::vector<GlobalTensor> apply_global(const GlobalContext& ctx, const std::string& op,
                                       const std::vector<GlobalTensor>& inputs,
                                       const std::vector<Shape>& output_shapes, const SignatureFn& candidates,
                                       const PlacedLocalFn& local) {
  const trace::Scope span = trace::enabled() ? trace::Scope("op", op, shapes_arg(inputs)) : trace::Scope();
  check_inputs(op, inputs, ctx.world_rank);
  const Placement* pl = inputs[0].placement;
  if (pl->size() == 1) return apply_on_one_rank(ctx, op, inputs, output_shapes, local);
  SignatureQuery q;
  q.op = op;
  q.output_shapes = output_shapes;
  q.placement = pl;
  q.world_rank = ctx.world_rank;
  for (const GlobalTensor& x : inputs) {
    q.inputs.push_back(x.nd_sbp);
    q.input_shapes.push_back(x.logical_shape);
    q.input_elem_nbytes.push_back(static_cast<int64_t>(dtype_nbytes(x.local.dtype())));
  }
  MF_CHECK(static_cast<int>(ctx.axis_comms.size()) == pl->ndim(), "global ", op, ": ", ctx.axis_comms.size(),
           " axis communicators for placement ", pl->str(), " (rank ", ctx.world_rank, ")");
  const NdSignature sig = infer_signature(q, candidates);

  std::vector<Tensor> pieces;
  pieces.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) pieces.push_back(box_to(inputs[i], sig.inputs[i], ctx.axis_comms).local);
  const std::vector<int64_t> coord = coordinate_in(*pl, ctx.world_rank, op.c_str());
  std::vector<Tensor> outs = local(pieces, LocalCall{sig, coord, ctx});
  MF_CHECK(outs.size() == output_shapes.size(), "global ", op, ": the local op gave ", outs.size(), " outputs, ",
           output_shapes.size(), " expected");
  std::vector<GlobalTensor> r;
  r.reserve(outs.size());
  for (size_t o = 0; o < outs.size(); ++o)
    r.push_back(to_global(outs[o], pl, sig.outputs[o], output_shapes[o], ctx.world_rank));
  return r;
}

std::vector<GlobalTensor> apply_global(const GlobalContext& ctx, const std::string& op,
                                       const std::vector<GlobalTensor>& inputs,
                                       const std::vector<Shape>& output_shapes, const SignatureFn& candidates,
                                       const LocalFn& local) {
  return apply_global(ctx, op, inputs, output_shapes, candidates,
                      [&local](const std::vector<Tensor>& t, const LocalCall&) { return local(t); });
}

}  // namespace mf::global
