#include "meshflow/models/registry.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "meshflow/models/bert/spec.h"
#include "meshflow/models/gpt2/spec.h"
#include "meshflow/models/gpt_neox/spec.h"
#include "meshflow/models/llama/spec.h"
#include "meshflow/models/mlp_lm/spec.h"
#include "meshflow/models/t5/spec.h"
#include "meshflow/models/vit/spec.h"

namespace mf::models {

namespace {

const std::map<std::string, ModelSpec>& specs() {
  static std::map<std::string, ModelSpec> all;
  static std::once_flag once;
  std::call_once(once, [] {
    // One line per model.
    for (ModelSpec s : {gpt2::spec(), mlp_lm::spec(), llama::llama_spec(), llama::qwen2_spec(), llama::mistral_spec(),
                        bert::bert_spec(), bert::roberta_spec(), t5::t5_spec(), t5::mt5_spec(), vit::vit_spec(),
                        gpt_neox::spec()}) {
      MF_CHECK(all.count(s.name) == 0, "model.name `", s.name, "` is registered twice");
      const std::string name = s.name;
      all.emplace(name, std::move(s));
    }
  });
  return all;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const auto& [name, s] : specs()) out.push_back(name);
  return out;
}

const ModelSpec& model_spec(const std::string& name) {
  auto it = specs().find(name);
  if (it != specs().end()) return it->second;
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  MF_THROW("unknown model.name `", name, "` (registered: ", known, ")");
}

const ModelSpec* model_spec_for_hf_type(const std::string& type) {
  for (const auto& [name, s] : specs())
    if (!s.hf.model_type.empty() && s.hf.model_type == type) return &s;
  return nullptr;
}

int64_t model_layers(const Config& c) {
  const ModelSpec& s = model_spec(c.get_string("model.name"));
  return s.num_layers ? s.num_layers(c) : c.get_int("model.num_layers");
}

void check_model_keys(const Config& c) {
  const std::string name = c.get_string("model.name");
  const ModelSpec& spec = model_spec(name);
  static const Config defaults = Config::defaults();
  for (const std::string& key : Config::keys()) {
    if (key.rfind("model.", 0) != 0 || key == "model.pretrained" || !c.is_given(key)) continue;
    if (std::find(spec.config_keys.begin(), spec.config_keys.end(), key) != spec.config_keys.end()) continue;
    if (c.value(key) == defaults.value(key)) continue;  // a run's whole config.yaml, read back
    std::string readers;
    for (const auto& [other, s] : specs())
      if (std::find(s.config_keys.begin(), s.config_keys.end(), key) != s.config_keys.end())
        readers += (readers.empty() ? "" : ", ") + other;
    const std::string by = c.given_by(key);
    MF_THROW(key, "=", c.get_text(key), by.empty() ? "" : " (" + by + ")", " is not a key of model.name=", name,
             ", which does not read it", readers.empty() ? std::string() : " (read by model.name " + readers + ")",
             ": remove it, or choose a model that reads it");
  }
}

std::vector<std::pair<std::string, Shape>> parameter_shapes(const Config& c) {
  return build_model(c, 0, ModelContext::shape_only())->parameter_shapes();
}

std::shared_ptr<Model> build_model(const Config& c, int64_t tokenizer_vocab_size, const ModelContext& ctx) {
  check_model_keys(c);
  return model_spec(c.get_string("model.name")).build(c, tokenizer_vocab_size, ctx);
}

}  // namespace mf::models
