// What every model's ModelSpec (registry.h) is built from: its build function, for a model whose
// checkpoint needs the run's config beside it its checkpoint_config, and its Hugging Face mapping.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "meshflow/models/registry.h"
#include "meshflow/models/schema.h"

namespace mf::models {

// A family's config of the run config `c` by its reader: read(c, tokenizer vocabulary size), or
// read(c) for a model without a vocabulary.
template <class Read>
auto read_family_config(Read read, const Config& c, int64_t vocab) {
  if constexpr (std::is_invocable_v<Read, const Config&, int64_t>) return read(c, vocab);
  else return read(c);
}

// The entries every family fills alike: model.name, build (model class M of its config, from
// `read` as read_family_config calls it), the schema's config and structure keys, and describe
// (describe(C), beside C).
template <class M, class Read, class C>
ModelSpec family_spec(std::string name, Read read, const Schema<C>& schema) {
  auto config_of = [read](const Config& c, int64_t vocab) { return read_family_config(read, c, vocab); };
  ModelSpec s;
  s.name = std::move(name);
  s.build = [config_of](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<M>(config_of(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
  s.config_keys = schema.config_keys();
  s.structure_keys = schema.structure_keys();
  s.describe = [config_of](const Config& c) { return describe(config_of(c, 0)); };
  return s;
}

// ModelSpec::checkpoint_config of a model whose tensors do not show every size (`unseen`, for
// the message): the sizes of the run's config.yaml (required), the vocabulary as the rows of the
// 2-D tensor table(sizes) (the tokenizer may have padded model.vocab_size), written back as
// model.* keys (model_config(C), beside C).
template <class C>
auto checkpoint_config_from_run(std::string family, std::string unseen, C (*sizes)(const Config&),
                                std::string (*table)(const C&)) {
  return [=](const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
    MF_CHECK(run != nullptr, source, ": a ", family, " checkpoint needs the run's config.yaml (or a Hugging Face ",
             "config.json) beside it: ", unseen, " not show in the tensors");
    C c = sizes(*run);
    const std::string name = table(c);
    for (const auto& [n, t] : tensors)
      if (n == name && t.ndim() == 2) c.vocab_size = t.shape(0);
    return model_config(c);
  };
}

// ModelSpec::hf of a family whose hf.cpp reads config.json (from_hf), writes it (to_hf) and reads
// the weight files' tensors for the config beside them (read); its config reader (as
// family_spec's) and model_config(C) (beside C) convert to and from its model.* keys, and the
// schema names config.json's keys.
template <class C, class Reader>
HfMapping hf_mapping(std::string model_type, std::string architecture, C (*from_hf)(const std::string&),
                     std::string (*to_hf)(const C&, DType), nn::NamedTensors (*read)(const io::HfModelFiles&, const C&),
                     Reader reader, const Schema<C>& schema) {
  HfMapping m;
  m.model_type = std::move(model_type);
  m.architecture = std::move(architecture);
  m.read_config = [from_hf](const std::string& path) { return model_config(from_hf(path)); };
  m.write_config = [to_hf, reader](const Config& c, DType dtype) { return to_hf(read_family_config(reader, c, 0), dtype); };
  m.read_tensors = [read, from_hf](const io::HfModelFiles& files) { return read(files, from_hf(files.config)); };
  m.key_names = schema.hf_key_names();
  return m;
}

}  // namespace mf::models
