#include "meshflow/nn/module.h"

#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"
#include "meshflow/tensor/allocator.h"

namespace mf::nn {

void Module::collect(const std::string& prefix, bool params, NamedTensors& out) const {
  for (const auto& [name, t] : params ? params_ : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, out);
  return out;
}

std::vector<std::pair<std::string, ParamLayout>> Module::declared_parameters() const {
  std::vector<std::pair<std::string, ParamLayout>> out(declared_);
  for (const auto& [name, child] : children_)
    for (auto& [n, l] : child->declared_parameters()) out.emplace_back(name + "." + n, std::move(l));
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  NamedTensors b = named_buffers();
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::unordered_map<std::string, Tensor> mine;
  for (auto& [name, t] : state_dict()) mine.emplace(name, t);
  size_t matched = 0;
  NoGradGuard ng;
  for (const auto& [name, src] : state) {
    auto it = mine.find(name);
    MF_CHECK(it != mine.end(), "load_state_dict: unexpected key '", name, "'");
    Tensor dst = it->second;
    MF_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "load_state_dict: '", name, "' is ",
             src.str(), " but the model holds ", dst.str());
    copy_(dst, src.device() == dst.device() ? src : to(src, dst.device()));  // e.g. host weights into a GPU model
    ++matched;
  }
  if (strict && matched != mine.size()) {
    for (auto& [name, t] : mine) {
      bool found = false;
      for (auto& [n2, s] : state) found = found || n2 == name;
      MF_CHECK(found, "load_state_dict: missing key '", name, "'");
    }
  }
}

void Module::to_device(Device device) {
  // One new storage per old one (ties and views keep sharing), swapped into every impl.
  // The old storages stay referenced until the end, so no address is reused as a key.
  std::unordered_map<const Storage*, std::pair<std::shared_ptr<Storage>, std::shared_ptr<Storage>>> moved;
  for (const auto& [name, t] : state_dict()) {
    TensorImpl* impl = t.impl();
    MF_CHECK(impl->storage && impl->storage->resident(), "to_device: '", name, "' ", t.str(),
             " has no resident storage (move the model before ZeRO-3 releases parameters)");
    if (impl->storage->device() == device) continue;
    auto it = moved.find(impl->storage.get());
    if (it == moved.end()) {
      const Storage& old = *impl->storage;
      auto fresh = std::make_shared<Storage>(old.nbytes(), device);
      copy_bytes(device, fresh->data(), old.device(), old.data(), old.nbytes());
      it = moved.emplace(impl->storage.get(), std::make_pair(impl->storage, std::move(fresh))).first;
    }
    impl->grad.reset();
    impl->storage = it->second.second;
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  ParamLayout layout = replicated_layout(t.shape());
  return register_parameter(name, std::move(t), std::move(layout));
}

Tensor Module::register_parameter(const std::string& name, Tensor t, ParamLayout layout) {
  declared_.emplace_back(name, layout);
  if (!t.defined()) return t;
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  layouts_.push_back(std::move(layout));
  return params_.back().second;
}

std::vector<ParamLayout> Module::parameter_layouts() const {
  std::vector<ParamLayout> out(layouts_);
  for (const auto& [name, child] : children_) {
    std::vector<ParamLayout> c = child->parameter_layouts();
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (const auto& [n, m] : children_)
    if (n == name) return m;
  return nullptr;
}

std::shared_ptr<ModuleGroup> ModuleGroup::group(const std::string& name) {
  if (std::shared_ptr<Module> m = child(name)) {
    auto g = std::dynamic_pointer_cast<ModuleGroup>(m);
    MF_CHECK(g != nullptr, "Module: child '", name, "' is not a group");
    return g;
  }
  return add(name, std::make_shared<ModuleGroup>());
}

}  // namespace mf::nn
