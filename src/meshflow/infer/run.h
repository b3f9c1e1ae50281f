// `meshflow generate` as a library call: prompts from the command line or a file, the model and
// its weights from the config (load.h), the text streamed as it is produced (one prompt) or
// printed per prompt (a batch), the throughput on stderr.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/infer/sampling.h"

namespace mf::infer {

struct GenerateArgs {
  std::vector<std::string> prompts;  // --prompt (repeatable)
  std::string prompt_file;           // --prompt-file: one prompt per line (empty lines skipped)
  int64_t max_new_tokens = 32;
  SamplingParams sampling;
  int64_t num_beams = 1;  // beam search when > 1
  double length_penalty = 1.0;
  bool ignore_eos = false;  // keep going past the tokenizer's end-of-text token
  bool print_ids = false;   // also print each row's new token ids ("ids: 12 7 ...")
};

// Collective over `world` (null: this process alone); rank 0 prints to `out`.
void run_generation(const Config& c, const GenerateArgs& a, std::FILE* out = stdout, const comm::CommPtr& world = nullptr);

}  // namespace mf::infer
