// What a training run reports to its caller, and a training run as a call: planning measures
// plans by training them (plan --measure) without depending on the trainer, which the
// executable passes in.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"

namespace mf::runtime {

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

// A whole training run from a resolved Config, collective over `world` (null: this process
// alone), printing to `out`: train::run_training.
using TrainRun = std::function<RunSummary(const Config&, std::FILE* out, const comm::CommPtr& world)>;

}  // namespace mf::runtime
