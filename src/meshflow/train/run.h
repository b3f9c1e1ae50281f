// A whole run from a resolved Config: tokenizer, data (Megatron indexed dataset split into
// train/valid by data.splits), GPT-2, trainer with the logging hook. What `meshflow train` and
// `meshflow eval` do, as library calls (tests use them too).
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/runtime/run_summary.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

// `world`: the processes of the run (null: this process alone). The train.dist sizes must
// multiply to its size (checked before any work); with data_parallel_size > 1 every rank trains
// on its slice of each global batch (see Trainer::set_data_parallel) and only rank 0 logs and
// writes. Collective over `world`: every rank calls it with the same config.
runtime::RunSummary run_training(const Config& c, std::FILE* out = stdout, const comm::CommPtr& world = nullptr);
// Evaluates the latest checkpoint in train.output_dir on the validation split (on one process),
// prints a line to `out` and writes the result in full precision to `results_file` ("":
// <train.output_dir>/eval_results.json), atomically: eval_results_json's object.
EvalStats run_evaluation(const Config& c, std::FILE* out = stdout, const std::string& results_file = "");
// The evaluation as a JSON object: checkpoint (its folder), step (its iteration), val_loss,
// val_ppl (null for a model without one), val_<metric> for each metric, samples and tokens
// evaluated (samples x data.seq_length).
std::string eval_results_json(const EvalStats& e, const std::string& checkpoint, int64_t samples, int64_t tokens);

}  // namespace mf::train
