// Registry<Signature>: a name → factory map for the config keys that pick an implementation
// (model.name, optim.name, train.scheduler.name, tokenization.tokenizer). Registration is
// explicit (an init function adds the builders; no static initialisers, which static libraries
// drop). An unknown name throws listing the registered ones.
//
//   Registry<std::unique_ptr<Model>(const Config&)> models("model.name");
//   models.add("gpt2", [](const Config& c) { return std::make_unique<Gpt2>(c); });
//   auto m = models.create(cfg.get_string("model.name"), cfg);
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/core/error.h"

namespace mf {

template <class Signature>
class Registry;

template <class R, class... Args>
class Registry<R(Args...)> {
 public:
  using Factory = std::function<R(Args...)>;

  // `what` names the choice in messages, e.g. "model.name".
  explicit Registry(std::string what) : what_(std::move(what)) {}

  // Adds a builder; adding a name twice is an error.
  void add(const std::string& name, Factory factory) {
    MF_CHECK(!name.empty(), what_, ": cannot register an empty name");
    MF_CHECK(factory, what_, ": empty factory for `", name, "`");
    MF_CHECK(factories_.emplace(name, std::move(factory)).second, what_, ": `", name, "` is registered twice");
  }

  bool contains(const std::string& name) const { return factories_.count(name) > 0; }

  // The builder for `name`; throws "unknown model.name `x` (registered: a, b)".
  const Factory& get(const std::string& name) const {
    auto it = factories_.find(name);
    if (it == factories_.end()) MF_THROW("unknown ", what_, " `", name, "` (registered: ", joined_names(), ")");
    return it->second;
  }

  // get(name)(args...).
  template <class... CallArgs>
  R create(const std::string& name, CallArgs&&... args) const {
    return get(name)(std::forward<CallArgs>(args)...);
  }

  // Registered names, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& kv : factories_) out.push_back(kv.first);
    return out;
  }

  const std::string& what() const { return what_; }

 private:
  std::string joined_names() const {
    if (factories_.empty()) return "none";
    std::string s;
    for (const auto& kv : factories_) s += (s.empty() ? "" : ", ") + kv.first;
    return s;
  }

  std::string what_;
  std::map<std::string, Factory> factories_;
};

}  // namespace mf
