// The training loop: gradient accumulation, clipping, optimizer and LR schedule, evaluation,
// checkpoints and resume, with hooks (LiBai's HookBase pattern) for everything periodic. The loop
// and the step are here; the services they call are beside it: checkpointer.h (save, resume),
// run_folder.h (the output folder's checks, lock and heartbeat), step_stats.h (what a step
// reports, memory, every rank's figures, tokens/s and MFU), evaluation.h.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/models/model.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/optim/scheduler.h"
#include "meshflow/random/generator.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/optim/loss_scaler.h"
#include "meshflow/train/checkpointer.h"
#include "meshflow/runtime/options.h"
#include "meshflow/train/pipeline_executor.h"
#include "meshflow/train/run_folder.h"
#include "meshflow/train/step_stats.h"
#include "meshflow/parallel/grad_sync.h"
#include "meshflow/parallel/groups.h"

namespace mf::train {

// The typed run configuration (runtime/options.h): the trainer's options.
using runtime::TrainOptions;

// Where micro-batches (models/batch.h: host tensors, i64) come from; its position is part of the
// training state.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual models::Batch next(int64_t micro_batch) = 0;
  virtual uint64_t position() const = 0;
  virtual void set_position(uint64_t pos) = 0;
};

class Trainer;

class HookBase {
 public:
  virtual ~HookBase() = default;
  virtual void before_train(Trainer&) {}
  virtual void before_step(Trainer&) {}  // the step about to run is iter() + 1
  virtual void after_step(Trainer&, const StepStats&) {}
  virtual void after_eval(Trainer&, const EvalStats&) {}
  virtual void after_train(Trainer&) {}
};

class Trainer {
 public:
  // `groups`: the run's parallel groups by name (parallel::ParallelContext; none: one process, or
  // set later by set_parallel); the group of each dimension the model's layers are placed over
  // (Model::place()) must be the model's.
  Trainer(TrainOptions opts, std::shared_ptr<models::Model> model, std::unique_ptr<BatchSource> train_data,
          std::function<std::unique_ptr<BatchSource>()> make_valid_data, parallel::NamedGroups groups = {});
  ~Trainer();

  // The parallel layout (call once, before train(); groups of one rank change nothing). `dp`: the
  // data-parallel group (every rank of it runs the same Trainer on the same model and options;
  // the batch sources must already give each rank its slice of the global batch, as
  // GptBatchSource(data, dp->rank(), dp->size()) does). The model's own Place (Model::place(): tp)
  // splits its layers; `all` is this stage's dp x tp ranks. Pipeline
  // parallelism: the model is this rank's stage (Model::stage()), `pp` the ranks holding the
  // other stages (same dp and tp index, ordered by stage), `world` every rank. Gradients are
  // synchronised by parallel::GradSync (data-parallel buckets overlapped with backward, ZeRO,
  // tied parameters); a loss replicated on the tp ranks is divided by tp before backward
  // (boxing's gradient rule); dropout draws by logical position, so any layout reproduces the
  // single-process run.
  void set_parallel(std::shared_ptr<comm::Communicator> dp, std::shared_ptr<comm::Communicator> all,
                    std::shared_ptr<comm::Communicator> pp = nullptr, std::shared_ptr<comm::Communicator> world = nullptr);
  // The same from groups made once (parallel::ParallelContext); the layer dimensions' groups must be the model's.
  void set_groups(parallel::NamedGroups groups);
  int64_t dp_size() const { return groups_.size("dp"); }
  bool is_main_rank() const { return groups_.main_rank(); }
  const parallel::NamedGroups& groups() const { return groups_; }
  // Whether step `iter` is logged: every train.log_period steps and the last.
  bool log_step(int64_t iter) const { return iter % std::max<int64_t>(1, opts_.log_period) == 0 || iter == opts_.train_iter; }
  // Pipeline statistics of the last step (this stage).
  const PipelineStats& last_pipeline_stats() const { return executor_.last_stats(); }
  // The reducer of the data-parallel gradients (of every parameter when tp == 1), or null.
  const parallel::GradReducer* grad_reducer() const { return sync_->grad_reducer(); }

  void add_hook(std::unique_ptr<HookBase> hook) { hooks_.push_back(std::move(hook)); }
  // Trains to train.train_iter (or exit_iter). SIGTERM, SIGINT or SIGUSR1 meanwhile (on any rank)
  // stops every rank after the same step, with a checkpoint of it and one line on stderr
  // (train/stop_signal.h); a second signal ends the process at once.
  void train();
  EvalStats evaluate();            // eval_iter batches from the start of the validation data
  void save_checkpoint();          // <output_dir>/checkpoints/iter_XXXXXXX, then `latest`
  bool load_latest_checkpoint();   // false when there is none

  int64_t iter() const { return iter_; }
  // The signal that stopped the last train() early (SIGTERM, SIGINT, SIGUSR1: it saved a
  // checkpoint of the step it finished and returned), 0 when none did.
  int stop_signal() const { return stop_signal_; }
  const TrainOptions& options() const { return opts_; }
  models::Model& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  // Mixed precision (bf16/f16 parameters, f32 master weights in the optimizer).
  bool mixed_precision() const { return is_half(model_->param_dtype()); }
  const optim::LossScaler& loss_scaler() const { return scaler_; }
  int64_t skipped_iters() const { return skipped_iters_; }
  // Where the model, its gradients and optimizer state, and the batches live.
  Device device() const { return device_; }
  // Peak FLOP/s of all ranks together (the MFU denominator): the CPU's nominal peak or its
  // measured FMA rate, the larger (peak_flops.h), or the GPU's dense peak from its data sheet (0
  // for a GPU not in the table: MFU is then reported 0). Raised when a step does more FLOP/s
  // (StepStats::peak_note says so), so that MFU stays at most 100%.
  double peak_flops() const { return meter_.peak_flops(); }
  const std::string& peak_source() const { return meter_.peak_source(); }  // which peak, for the log
  // Tokens of one optimizer step over all data-parallel ranks (tp ranks share theirs).
  int64_t tokens_per_step() const { return global_batch_size() * opts_.seq_length; }
  // Samples of one optimizer step over all data-parallel ranks.
  int64_t global_batch_size() const { return opts_.micro_batch * opts_.accumulation_steps * groups_.dims().batch_ranks(); }

 private:
  StepStats train_step();
  // Zeroes the gradients and sets the step's learning rate (into s.lr); returns the bytes sent so far.
  uint64_t begin_step(StepStats& s);
  std::vector<PipelineExecutor::Batch> next_batches();
  std::vector<double> loss_totals(const std::vector<PipelineExecutor::Batch>& batches) const;
  double finish_grad_sync();  // seconds the gradient reductions were waited for after backward
  void update(StepStats& s);  // clip, the optimizer step (skipped on an overflow), the loss scale
  void finish_stats(StepStats& s, uint64_t comm_bytes0);  // timing, memory, traffic; every rank's at log steps
  // Builds the gradient synchronisation for groups_ and the optimizer over what it shards.
  void build_sync();
  TrainingStateRefs state_refs();  // what a checkpoint saves and a resume restores
  void run_hooks(const std::function<void(HookBase&)>& f);

  TrainOptions opts_;
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<BatchSource> train_data_;
  std::function<std::unique_ptr<BatchSource>()> make_valid_data_;
  parallel::NamedGroups groups_;
  std::unique_ptr<parallel::GradSync> sync_;
  PipelineExecutor executor_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrScheduler scheduler_;
  std::vector<std::unique_ptr<HookBase>> hooks_;
  int64_t iter_ = 0;
  int stop_signal_ = 0;
  StepMeter meter_;
  Device device_ = cpu_device();
  optim::LossScaler scaler_;
  int64_t skipped_iters_ = 0;
  RunFolder run_folder_;  // the lock held until the trainer goes, the watchdog while training
};

}  // namespace mf::train
