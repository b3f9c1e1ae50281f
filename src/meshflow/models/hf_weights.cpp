#include "meshflow/models/hf_weights.h"

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/model.h"

namespace mf::models {

namespace {
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}
}  // namespace

nn::NamedTensors read_hf_weights(const io::HfModelFiles& files, const HfWeightRules& rules) {
  struct Copy {
    std::string name, file;
    Tensor t;
  };
  nn::NamedTensors out;
  std::vector<Copy> copies;
  for (const std::string& file : files.weights)
    for (auto& [stored, t] : io::load_safetensors(file).tensors) {
      const std::string name = rules.rename ? rules.rename(stored) : stored;
      if (name.empty()) continue;
      if (rules.tied.count(name)) {
        copies.push_back({name, file, t});
        continue;
      }
      MF_CHECK(rules.known(name), file, ": unknown tensor '", stored, "' (not a parameter of ", rules.model, ")");
      out.emplace_back(name, t);
    }
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : out)
      if (n == name) return &t;
    return nullptr;
  };
  for (const Copy& c : copies) {
    const HfTie& tie = rules.tied.at(c.name);
    const Tensor* p = find(tie.parameter);
    if (p == nullptr) {  // the files hold the parameter under this copy's name only
      out.emplace_back(tie.parameter, c.t);
      continue;
    }
    MF_CHECK(same_bytes(*p, c.t), c.file, ": ", c.name, " ", c.t.str(), " differs from ",
             tie.words.empty() ? tie.parameter + ", to which Hugging Face ties it" : tie.words);
  }
  return out;
}

std::function<bool(const std::string&)> parameter_of(const Model& model) {
  auto names = std::make_shared<std::set<std::string>>();
  for (const auto& [name, shape] : model.parameter_shapes()) names->insert(name);
  return [names](const std::string& name) { return names->count(name) > 0; };
}

}  // namespace mf::models
