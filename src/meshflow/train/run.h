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
#include "meshflow/train/trainer.h"

namespace mf::train {

// tokenization.tokenizer: gpt2_bpe (tokenization.vocab_file + merges_file) or byte.
std::unique_ptr<Tokenizer> tokenizer_from_config(const Config& c);

struct RunSummary {
  int64_t iterations = 0;
  double final_train_loss = 0;
  double final_val_loss = 0;       // NaN when evaluation is off
  double unigram_entropy = 0;      // nats per token of the training split's tokens
  // Each step's seconds on the slowest rank, and the largest allocator peak any rank reached in a
  // step: gathered on the steps the log period logs (every step with train.log_period=1).
  std::vector<double> step_seconds;
  int64_t peak_bytes = 0;
  int stop_signal = 0;  // the signal that stopped the run early with a checkpoint (0: none)
};

// `world`: the processes of the run (null: this process alone). The train.dist sizes must
// multiply to its size (checked before any work); with data_parallel_size > 1 every rank trains
// on its slice of each global batch (see Trainer::set_data_parallel) and only rank 0 logs and
// writes. Collective over `world`: every rank calls it with the same config.
RunSummary run_training(const Config& c, std::FILE* out = stdout, const comm::CommPtr& world = nullptr);
// Evaluates the latest checkpoint in train.output_dir on the validation split (on one process),
// prints a line to `out` and writes the result in full precision to `results_file` ("":
// <train.output_dir>/eval_results.json), atomically: eval_results_json's object.
EvalStats run_evaluation(const Config& c, std::FILE* out = stdout, const std::string& results_file = "");
// The evaluation as a JSON object: checkpoint (its folder), step (its iteration), val_loss,
// val_ppl (null for a model without one), val_<metric> for each metric, samples and tokens
// evaluated (samples x data.seq_length).
std::string eval_results_json(const EvalStats& e, const std::string& checkpoint, int64_t samples, int64_t tokens);
// `c` with the layout of one process (tp, pp, virtual stages, stage ids, sequence parallelism and
// ZeRO off): what run_evaluation evaluates with, whatever layout trained the run, as a checkpoint
// reads into any.
Config one_process_config(const Config& c);

}  // namespace mf::train
