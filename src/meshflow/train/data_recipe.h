// Where a run's batches come from, one recipe per task (the model's batch kind,
// Model::batch_kind()): a recipe opens the task's datasets from the Config and returns the
// training source and a maker of validation sources. Each task's recipe lives beside its batch
// source (gpt_batches.h, bert_batches.h, t5_batches.h, image_batches.h); the registry maps the
// task's name to it, so that a new task is a new entry, not a branch of the run.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "meshflow/config/config.h"
#include "meshflow/config/registry.h"
#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/split.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

// What a recipe reads: the run's config, model and tokenizer, and how many samples it trains on
// and evaluates (each 0: none) over `dp` data-parallel ranks, this being `dp_rank`.
struct RecipeInputs {
  const Config& config;
  const models::Model& model;
  const Tokenizer& tokenizer;
  const TrainOptions& options;
  int64_t train_samples = 0;  // the run's samples (0: evaluation only)
  int64_t valid_samples = 0;  // per evaluation (0: no evaluation)
  int64_t dp_rank = 0, dp = 1;
  int64_t seq_length = 0;  // runtime::sequence_length(config)
};

// A run's batches, with the datasets they read kept alive.
struct RunSources {
  std::unique_ptr<BatchSource> train;
  std::function<std::unique_ptr<BatchSource>()> valid;
  std::shared_ptr<void> keep;
  double unigram_entropy = std::numeric_limits<double>::quiet_NaN();  // causal LM: the loss's baseline
  std::string note;  // one line for the log ("" none)
};

using DataRecipeRegistry = Registry<RunSources(const RecipeInputs&)>;

// The recipes by task: causal_lm, masked_lm, span_corruption, sequence_classification,
// image_classification (registered on first use).
DataRecipeRegistry& data_recipe_registry();
// The task name of a batch kind, as the registry knows it.
std::string task_name(models::BatchKind kind);
// The recipe of the model's task.
RunSources make_sources(const RecipeInputs& in);

// A Megatron indexed dataset (data.data_prefix) split by data.splits into training and
// validation ranges, over documents (by_document: sentence-split data, several sequences each)
// or sequences (one per document, as our preprocessing writes them).
struct SplitData {
  std::unique_ptr<IndexedDataset> indexed;
  DocumentRange train_range, valid_range;
};
SplitData open_split_data(const Config& c, bool by_document);
// Throws naming data.splits when evaluation needs validation documents and the split left none.
void check_validation_range(const Config& c, const SplitData& d);
// The training and validation datasets over a split, each only when asked for (samples > 0):
// open(range, seed, samples) -> std::shared_ptr<Dataset>, the validation one with seed + 1.
template <class Open>
auto open_train_valid(const RecipeInputs& in, const SplitData& d, Open open) {
  decltype(open(d.train_range, in.options.seed, in.train_samples)) train, valid;
  if (in.train_samples > 0) train = open(d.train_range, in.options.seed, in.train_samples);
  if (in.valid_samples > 0) {
    check_validation_range(in.config, d);
    valid = open(d.valid_range, in.options.seed + 1, in.valid_samples);
  }
  return std::make_pair(train, valid);
}

}  // namespace mf::train
