// A whole run from a resolved Config: tokenizer, data (Megatron indexed dataset split into
// train/valid by data.splits), GPT-2, trainer with the logging hook. What `meshflow train` and
// `meshflow eval` do, as library calls (tests use them too).
#pragma once
#include <cstdio>
#include <memory>

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
};

RunSummary run_training(const Config& c, std::FILE* out = stdout);
// Evaluates the latest checkpoint in train.output_dir on the validation split.
EvalStats run_evaluation(const Config& c, std::FILE* out = stdout);

}  // namespace mf::train
