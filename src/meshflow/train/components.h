// The registries that map config names to components: model.name, optim.name,
// train.scheduler.name and tokenization.tokenizer. Built-in components are registered
// explicitly on first use (no static initialisers); an unknown name is an error that lists the
// registered ones.
#pragma once
#include <memory>

#include "meshflow/config/config.h"
#include "meshflow/config/registry.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/models/gpt2.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/optim/scheduler.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

// (config, tokenizer vocabulary size) -> model, initialised from train.seed
// (config, tokenizer vocabulary size, tensor-parallel group, pipeline stage) -> an initialised model.
using ModelRegistry = Registry<std::shared_ptr<models::Gpt2Model>(const Config&, int64_t, const nn::TensorParallel&,
                                                                  const models::Gpt2Stage&)>;
using OptimizerRegistry = Registry<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>, const TrainOptions&)>;
using SchedulerRegistry = Registry<optim::LrScheduler(optim::SchedulerConfig)>;
using TokenizerRegistry = Registry<std::unique_ptr<Tokenizer>(const Config&)>;

ModelRegistry& model_registry();
OptimizerRegistry& optimizer_registry();
SchedulerRegistry& scheduler_registry();
TokenizerRegistry& tokenizer_registry();

}  // namespace mf::train
