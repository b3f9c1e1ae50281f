// Graph nodes of the define-by-run autograd. An op that records history creates one Node
// whose edges point at the producers of its inputs; backward formulas are written with
// public ops (ops/ops.h), so they run on any device.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
  uint32_t input_nr = 0;       // which of node's gradient inputs this edge feeds
};

struct OutputMeta {  // to materialise a zero gradient for an unused output
  Shape shape;
  DType dtype;
  Device device;
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  // grads[i] is the gradient of output i (never undefined: the engine fills zeros).
  // Returns one gradient per edge (undefined where the edge is null).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Drops saved tensors after a backward pass without retain_graph.
  virtual void release() { released_ = true; }
  bool released() const { return released_; }

  uint64_t sequence_nr() const { return seq_; }  // creation order: later nodes run first
  // Leaf accumulators run as soon as they are ready, whatever their age, so that a parameter's
  // gradient-ready hooks (data-parallel buckets) fire as early in backward as possible.
  virtual bool accumulates_leaf() const { return false; }
  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;

 protected:
  bool released_ = false;

 private:
  uint64_t seq_;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads)>;

// A node whose backward is a closure: saved tensors are the closure's captures and are
// freed on release(). Capture outputs as `out.detach()` to avoid a reference cycle.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  void release() override {
    fn_ = nullptr;
    released_ = true;
  }

 private:
  std::string name_;
  BackwardFn fn_;
};

// Accumulates into a leaf's .grad and then fires its grad-ready hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {}
  // Adds one incoming gradient into .grad (taking `g`'s buffer when nothing else can see it).
  // The engine calls it as each gradient arrives, so a leaf used several times (a tied
  // embedding) holds one incoming gradient beside .grad, never a running sum as well.
  void accumulate(Tensor g);
  // The leaf's .grad as it stands (undefined when none yet, or the leaf is gone).
  Tensor grad() const;
  // Accumulates grads[0] if defined, then fires the hooks: the gradient is final for this pass.
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  bool accumulates_leaf() const override { return true; }
  void release() override {}  // holds nothing to free; can run again

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// Inside a backward function run by the engine: the .grad that the gradient of its input
// `input` will be added to, when that input is a leaf whose .grad already exists, contiguous and
// of the given shape, dtype and device (undefined otherwise). A backward may add its gradient there itself and return an undefined one for that
// input: an embedding's few rows (a vocabulary-sized table's gradient, GPT-2's 50257 x 768:
// 154 MB, is then neither zero-filled nor summed), a weight-gradient GEMM with beta = 1. The
// leaf's hooks still fire once, after every gradient of the pass has arrived.
Tensor accumulation_target(size_t input, const Shape& shape, DType dtype, Device device);

// The edge through which a gradient reaches `t` (null edge if t needs no grad).
Edge gradient_edge(const Tensor& t);

// Records `outputs` as produced by op `name` from `inputs` when grad mode is on and any input
// requires grad: creates a FunctionNode running `fn`, and sets outputs' grad_fn.
// fn receives one gradient per output and returns one per input (undefined allowed).
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn);
// True when grad mode is on and any of `inputs` requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

}  // namespace mf
