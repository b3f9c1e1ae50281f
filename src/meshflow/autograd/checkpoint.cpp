#include "meshflow/autograd/checkpoint.h"

#include "meshflow/autograd/engine.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/random/batch_slice.h"

namespace mf {

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  if (!grad_enabled()) return fn(inputs);
  MF_CHECK(any_requires_grad(inputs), "checkpoint: no input requires grad, so gradients could not reach the "
           "parameters used inside; pass the activation that enters the block as an input");
  GeneratorState start = g.state();
  BatchSlice slice = current_batch_slice();
  std::vector<Tensor> saved;
  for (const auto& t : inputs) saved.push_back(t.defined() ? t.detach() : Tensor());
  std::vector<bool> needs;
  for (const auto& t : inputs) needs.push_back(t.requires_grad());
  std::vector<Tensor> outs;
  {
    NoGradGuard ng;
    outs = fn(saved);
  }
  for (auto& o : outs) o = o.detach();  // fresh impls we own (fn may return an input as is)
  record("checkpoint", inputs, outs, [fn, saved, needs, start, slice, &g](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    GeneratorState resume = g.state();
    g.set_state(start);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor t = saved[i].defined() ? saved[i].detach() : Tensor();
      if (needs[i]) t.set_requires_grad(true);
      ins.push_back(t);
    }
    std::vector<Tensor> re;
    {
      EnableGradGuard eg;
      BatchSliceGuard bs(slice);
      re = fn(ins);
    }
    g.set_state(resume);
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < re.size(); ++i)
      if (re[i].requires_grad()) {
        roots.push_back(re[i]);
        root_grads.push_back(grads[i]);
      }
    if (!roots.empty()) run_backward(roots, root_grads, false);
    std::vector<Tensor> result;
    for (size_t i = 0; i < ins.size(); ++i) result.push_back(needs[i] ? ins[i].grad() : Tensor());
    return result;
  });
  return outs;
}

}  // namespace mf
