// Module: a tree of named parameters, buffers and child modules, as in torch.nn. Names join
// with '.' (e.g. "transformer.h.0.attn.c_attn.weight"), in registration order.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/nn/param_layout.h"
#include "meshflow/tensor/tensor.h"

namespace mf::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  NamedTensors named_parameters() const;  // recursive, registration order
  // Every parameter the module declares, held on this rank or built shape-only (a part of the
  // model another rank holds: models/model.h), with its layout, in registration order: the whole
  // model's names and logical shapes, whatever this rank holds.
  std::vector<std::pair<std::string, ParamLayout>> declared_parameters() const;
  // One layout per parameter, in named_parameters() order: how the local tensor relates to the
  // logical (checkpoint) tensor under tensor parallelism (replicated unless the layer split it).
  std::vector<ParamLayout> parameter_layouts() const;
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;  // elements

  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool training() const { return training_; }

  // Parameters and buffers by name (the tensors themselves, sharing storage).
  NamedTensors state_dict() const;
  // Copies values in; every entry must exist with the same shape and dtype, and (strict) every
  // parameter/buffer must be given. Errors name the key.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  // Moves every parameter and buffer to `device`, in place: each tensor keeps its TensorImpl (so
  // autograd leaves, grad-ready hooks, layer members and the tied embedding stay the same
  // tensors), tensors that shared a storage share the new one, values are copied bit for bit.
  // Gradients are dropped. Call before an optimizer or a reducer takes the parameters.
  void to_device(Device device);

 protected:
  Tensor register_parameter(const std::string& name, Tensor t);  // sets requires_grad; replicated
  // An undefined `t`: the parameter is declared shape-only (another rank holds it): it is in
  // declared_parameters() and nowhere else, and the returned tensor is undefined.
  Tensor register_parameter(const std::string& name, Tensor t, ParamLayout layout);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  // The child registered as `name`, or null.
  std::shared_ptr<Module> child(const std::string& name) const;

 private:
  void collect(const std::string& prefix, bool params, NamedTensors& out) const;
  NamedTensors params_, buffers_;
  std::vector<ParamLayout> layouts_;  // one per params_ entry
  std::vector<std::pair<std::string, ParamLayout>> declared_;  // held or shape-only
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A module that only groups children under names (the "transformer" / "h" of GPT-2).
class ModuleGroup : public Module {
 public:
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
  // The child group `name`, added (empty) when there is none; throws when `name` is a module
  // that is not a group.
  std::shared_ptr<ModuleGroup> group(const std::string& name);
};

}  // namespace mf::nn
