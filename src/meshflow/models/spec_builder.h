// What every model's ModelSpec (registry.h) is built from: its build function and, for a model
// whose checkpoint needs the run's config beside it, its checkpoint_config.
#pragma once
#include <memory>
#include <string>

#include "meshflow/models/registry.h"

namespace mf::models {

// ModelSpec::build of model class M, made from its config C = read(run config, tokenizer
// vocabulary size) and initialised from train.seed.
template <class M, class C>
auto build_as(C (*read)(const Config&, int64_t)) {
  return [read](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<M>(read(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
}

// ModelSpec::checkpoint_config of a model whose tensors do not show every size (`unseen`, for
// the message): the sizes of the run's config.yaml (required), the vocabulary as the rows of the
// 2-D tensor table(sizes) (the tokenizer may have padded model.vocab_size), written back as
// model.* keys.
template <class C>
auto checkpoint_config_from_run(std::string family, std::string unseen, C (*sizes)(const Config&),
                                std::string (*table)(const C&), Config (*write)(const C&)) {
  return [=](const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
    MF_CHECK(run != nullptr, source, ": a ", family, " checkpoint needs the run's config.yaml (or a Hugging Face ",
             "config.json) beside it: ", unseen, " not show in the tensors");
    C c = sizes(*run);
    const std::string name = table(c);
    for (const auto& [n, t] : tensors)
      if (n == name && t.ndim() == 2) c.vocab_size = t.shape(0);
    return write(c);
  };
}

}  // namespace mf::models
