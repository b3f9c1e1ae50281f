#include "meshflow/autograd/node.h"

#include <atomic>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"

namespace mf {

namespace {
std::atomic<uint64_t> g_next_seq{0};
}

Node::Node() : seq_(g_next_seq.fetch_add(1)) {}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  MF_CHECK(fn_ != nullptr, "backward through a graph that has already been freed (op '", name_,
           "'): its saved tensors were released by an earlier backward(); pass retain_graph=true to the "
           "first backward() to run backward twice");
  return fn_(grads);
}

void AccumulateGrad::accumulate(Tensor g) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return;
  MF_CHECK(g.shape() == leaf->shape, "AccumulateGrad: gradient ", g.str(), " does not match parameter shape ",
           shape_str(leaf->shape));
  if (!leaf->grad) {
    // Take the incoming buffer when nothing else can see it (the engine moved it here);
    // otherwise copy, so .grad never aliases another tensor.
    bool sole_owner = g.impl_ptr().use_count() == 1 && g.impl()->storage.use_count() == 1;
    leaf->grad = sole_owner && g.is_contiguous() && g.offset() == 0 && !g.requires_grad() ? g.impl_ptr()
                                                                                          : clone(g).impl_ptr();
  } else {
    Tensor acc(leaf->grad);
    add_(acc, g);
  }
}

Tensor AccumulateGrad::grad() const {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  return leaf && leaf->grad ? Tensor(leaf->grad) : Tensor();
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  if (!leaf) return {};
  if (!grads.empty() && grads[0].defined()) accumulate(std::move(grads[0]));
  Tensor param(leaf);
  for (auto& hook : leaf->grad_ready_hooks) hook(param);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (!impl->grad_accumulator) {
    auto acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->outputs.push_back({impl->shape, impl->dtype, t.device()});
    impl->grad_accumulator = acc;
  }
  return {impl->grad_accumulator, 0};
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const auto& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->next_edges.reserve(inputs.size());
  for (const auto& in : inputs) node->next_edges.push_back(gradient_edge(in));
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* o = outputs[i].impl();
    node->outputs.push_back({o->shape, o->dtype, outputs[i].device()});
    o->grad_fn = node;
    o->output_nr = static_cast<uint32_t>(i);
    o->requires_grad = true;
  }
}

}  // namespace mf
