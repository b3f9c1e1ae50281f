#include "meshflow/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/trace.h"
#include "meshflow/autograd/node.h"
#include "meshflow/ops/ops.h"

namespace mf {

namespace {

// The node whose backward runs on this thread (accumulation_target), restored on exit: a
// backward may run a nested pass (activation checkpointing).
thread_local const Node* t_applying = nullptr;
class Applying {
 public:
  explicit Applying(const Node* n) : prev_(t_applying) { t_applying = n; }
  ~Applying() { t_applying = prev_; }
  Applying(const Applying&) = delete;
  Applying& operator=(const Applying&) = delete;

 private:
  const Node* prev_;
};

// Leaf accumulators first, then later-created nodes first.
struct LaterFirst {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    if (a->accumulates_leaf() != b->accumulates_leaf()) return b->accumulates_leaf();
    return a->sequence_nr() < b->sequence_nr();
  }
};

// Gradients meeting at a node are summed in arrival order; a leaf's go into its .grad as they
// arrive (AccumulateGrad::accumulate), so no running sum is held beside it.
void accumulate(Node& node, std::vector<Tensor>& slots, uint32_t idx, Tensor g) {
  if (node.accumulates_leaf()) {
    static_cast<AccumulateGrad&>(node).accumulate(std::move(g));
    return;
  }
  if (slots.size() < node.outputs.size()) slots.resize(node.outputs.size());
  Tensor& s = slots.at(idx);
  s = s.defined() ? add(s, g) : std::move(g);
}

}  // namespace

Tensor accumulation_target(size_t input, const Shape& shape, DType dtype, Device device) {
  if (t_applying == nullptr || input >= t_applying->next_edges.size()) return {};
  const Edge& e = t_applying->next_edges[input];
  if (!e.node || !e.node->accumulates_leaf()) return {};
  Tensor g = static_cast<const AccumulateGrad&>(*e.node).grad();
  const bool fits = g.defined() && g.is_contiguous() && g.shape() == shape && g.dtype() == dtype && g.device() == device;
  return fits ? g : Tensor();
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  MF_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " outputs but ", grads.size(), " gradients");
  NoGradGuard no_grad;

  // Count, for every node reachable from the roots, how many edges feed it.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradient_edge(roots[i]);
    MF_CHECK(e.node != nullptr, "backward: output ", i, " ", roots[i].str(),
             " does not require grad (no input of its graph has requires_grad=true)");
    MF_CHECK(grads[i].shape() == roots[i].shape() && grads[i].dtype() == roots[i].dtype(), "backward: gradient ",
             grads[i].str(), " does not match output ", roots[i].str());
    root_edges.push_back(e);
    if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, LaterFirst> ready;
  std::unordered_set<Node*> queued;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge& e = root_edges[i];
    accumulate(*e.node, buffers[e.node.get()], e.input_nr, grads[i]);
    if (deps[e.node.get()] == 0 && queued.insert(e.node.get()).second) ready.push(e.node);
  }

  while (!ready.empty()) {
    std::shared_ptr<Node> n = ready.top();
    ready.pop();
    std::vector<Tensor> in = std::move(buffers[n.get()]);
    buffers.erase(n.get());
    in.resize(n->outputs.size());
    if (!n->accumulates_leaf())  // a leaf's gradient is already in its .grad
      for (size_t i = 0; i < in.size(); ++i)
        if (!in[i].defined()) in[i] = zeros(n->outputs[i].shape, n->outputs[i].dtype, n->outputs[i].device);
    std::vector<Tensor> out;
    {
      const trace::Scope span = trace::enabled() ? trace::Scope("op_backward", n->name() + " backward") : trace::Scope();
      const Applying applying(n.get());
      out = n->apply(std::move(in));
    }
    // The incoming gradients go now, before the outgoing ones are passed on: an outgoing one that
    // shares their buffer (unbind's, of attention's dq, dk and dv) is then its sole owner.
    std::vector<Tensor>().swap(in);
    if (!retain_graph) n->release();
    MF_CHECK(out.size() == n->next_edges.size() || n->next_edges.empty(), "backward of '", n->name(), "' returned ",
             out.size(), " gradients for ", n->next_edges.size(), " inputs");
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.node) continue;
      if (out[i].defined()) {
        const OutputMeta& m = e.node->outputs.at(e.input_nr);
        MF_CHECK(out[i].shape() == m.shape, "backward of '", n->name(), "': gradient ", i, " has shape ",
                 shape_str(out[i].shape()), ", expected ", shape_str(m.shape));
        accumulate(*e.node, buffers[e.node.get()], e.input_nr, std::move(out[i]));
      }
      if (--deps[e.node.get()] == 0) ready.push(e.node);
    }
  }
}

}  // namespace mf
