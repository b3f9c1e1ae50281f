// The training loop: gradient accumulation, clipping, optimizer and LR schedule, evaluation,
// checkpoints and resume, with hooks (LiBai's HookBase pattern) for everything periodic.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/models/gpt2.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/optim/scheduler.h"
#include "meshflow/random/generator.h"

namespace mf::train {

// Where (ids, labels) micro-batches come from; its position is part of the training state.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::pair<Tensor, Tensor> next(int64_t micro_batch) = 0;  // (B, T) i64 each
  virtual uint64_t position() const = 0;
  virtual void set_position(uint64_t pos) = 0;
};

struct TrainOptions {
  std::string output_dir = "output";
  int64_t train_iter = 100;
  int64_t exit_iter = 0;  // > 0: checkpoint and stop after this iteration (as if interrupted)
  int64_t micro_batch = 4;
  int64_t accumulation_steps = 1;
  int64_t log_period = 10;
  uint64_t seed = 1234;
  int64_t checkpoint_period = 0;  // 0: only at the end
  int64_t max_to_keep = 2;
  bool resume = false;
  bool eval_enabled = true;
  int64_t eval_period = 0;  // 0: only at the end
  int64_t eval_iter = 10;
  int64_t eval_micro_batch = 4;
  double clip_grad_max_norm = 1.0;
  std::string optim = "adamw";
  double lr = 6e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, momentum = 0.9;
  optim::SchedulerConfig scheduler;
  int64_t seq_length = 128;
  std::string config_yaml;  // resolved config, written to <output_dir>/config.yaml
};

struct StepStats {
  int64_t iter = 0;  // 1-based: the number of optimizer steps done
  double loss = 0, lr = 0, grad_norm = 0;
  double step_seconds = 0, tokens_per_sec = 0, mfu = 0;
  int64_t peak_bytes = 0;
};

struct EvalStats {
  int64_t iter = 0;
  double loss = 0, perplexity = 0;
};

class Trainer;

class HookBase {
 public:
  virtual ~HookBase() = default;
  virtual void before_train(Trainer&) {}
  virtual void after_step(Trainer&, const StepStats&) {}
  virtual void after_eval(Trainer&, const EvalStats&) {}
  virtual void after_train(Trainer&) {}
};

class Trainer {
 public:
  Trainer(TrainOptions opts, std::shared_ptr<models::Gpt2Model> model, std::unique_ptr<BatchSource> train_data,
          std::function<std::unique_ptr<BatchSource>()> make_valid_data);

  void add_hook(std::unique_ptr<HookBase> hook) { hooks_.push_back(std::move(hook)); }
  void train();
  EvalStats evaluate();            // eval_iter batches from the start of the validation data
  void save_checkpoint();          // <output_dir>/checkpoints/iter_XXXXXXX, then `latest`
  bool load_latest_checkpoint();   // false when there is none

  int64_t iter() const { return iter_; }
  const TrainOptions& options() const { return opts_; }
  models::Gpt2Model& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  double peak_flops() const { return peak_flops_; }
  int64_t tokens_per_step() const { return opts_.micro_batch * opts_.accumulation_steps * opts_.seq_length; }

 private:
  StepStats train_step();
  void run_hooks(const std::function<void(HookBase&)>& f);

  TrainOptions opts_;
  std::shared_ptr<models::Gpt2Model> model_;
  std::unique_ptr<BatchSource> train_data_;
  std::function<std::unique_ptr<BatchSource>()> make_valid_data_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrScheduler scheduler_;
  std::vector<std::unique_ptr<HookBase>> hooks_;
  int64_t iter_ = 0;
  double peak_flops_ = 0;
};

}  // namespace mf::train
