#include "meshflow/models/registry.h"

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

std::shared_ptr<Model> build_model(const Config& c, int64_t tokenizer_vocab_size, const ModelContext& ctx) {
  return model_spec(c.get_string("model.name")).build(c, tokenizer_vocab_size, ctx);
}

}  // namespace mf::models
