// The run's outputs as a trainer hook: a console line every train.log_period steps (step, loss,
// lr, grad norm, tokens/s, MFU, peak memory, ETA), a progress bar when stdout is a terminal,
// <output_dir>/metrics.jsonl and TensorBoard event files under <output_dir>/tensorboard.
#pragma once
#include <chrono>
#include <memory>

#include "meshflow/train/metrics_writer.h"
#include "meshflow/train/progress.h"
#include "meshflow/train/tensorboard.h"
#include "meshflow/train/trainer.h"

namespace mf::train {

class LoggingHook : public HookBase {
 public:
  explicit LoggingHook(std::FILE* out = stdout) : out_(out) {}
  void before_train(Trainer& t) override;
  void after_step(Trainer& t, const StepStats& s) override;
  void after_eval(Trainer& t, const EvalStats& e) override;
  void after_train(Trainer& t) override;

 private:
  std::FILE* out_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<ProgressBar> bar_;
  // sums since the last log line
  double loss_sum_ = 0, time_sum_ = 0, tokens_ = 0;
  int64_t steps_ = 0, first_iter_ = 0;
  bool memory_reported_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mf::train
