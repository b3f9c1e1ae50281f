// Evaluation: the validation loss (and the model's metrics) of a number of batches, forwards only
// through the pipeline executor, over every pipeline stage and data-parallel rank.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "meshflow/models/model.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/train/pipeline_executor.h"
#include "meshflow/train/step_stats.h"

namespace mf::train {

class BatchSource;

// `batches` batches of `micro_batch` samples from the start of the validation data (made afresh by
// `make_data`, so every evaluation reads the same batches), the model in eval mode (back in train
// mode after): their mean loss over the data-parallel ranks, its perplexity for a causal
// language model, and the model's metrics. Collective over the pp and dp groups. EvalStats::iter
// is left 0.
EvalStats evaluate_batches(models::Model& model, PipelineExecutor& executor,
                           const std::function<std::unique_ptr<BatchSource>()>& make_data, int64_t batches,
                           int64_t micro_batch, const parallel::NamedGroups& groups);

}  // namespace mf::train
