// The registries that map config names to components: optim.name, train.scheduler.name and
// tokenization.tokenizer (model.name: models/registry.h). Built-in components are registered
// explicitly on first use (no static initialisers); an unknown name is an error that lists the
// registered ones.
#pragma once
#include <memory>

#include "meshflow/config/config.h"
#include "meshflow/config/registry.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/optim/scheduler.h"
#include "meshflow/runtime/options.h"

namespace mf::runtime {

using OptimizerRegistry = Registry<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>, const TrainOptions&)>;
using SchedulerRegistry = Registry<optim::LrScheduler(optim::SchedulerConfig)>;
using TokenizerRegistry = Registry<std::unique_ptr<Tokenizer>(const Config&)>;

OptimizerRegistry& optimizer_registry();
SchedulerRegistry& scheduler_registry();
TokenizerRegistry& tokenizer_registry();

// tokenization.tokenizer (gpt2_bpe, hf_bpe, sentencepiece, wordpiece or byte) built from its keys.
std::unique_ptr<Tokenizer> tokenizer_from_config(const Config& c);

}  // namespace mf::runtime
