#include "meshflow/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/dist/grad_reducer.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/train/checkpoint.h"
#include "meshflow/train/components.h"
#include "meshflow/train/peak_flops.h"

namespace mf::train {

namespace fs = std::filesystem;

namespace {
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const models::Gpt2Model& m) {
  return optimizer_registry().create(o.optim, optim::default_param_groups(m, o.weight_decay), o);
}

optim::SchedulerConfig scheduler_config(const TrainOptions& o) {
  optim::SchedulerConfig c = o.scheduler;
  c.base_lr = o.lr;
  c.total_iters = o.train_iter;
  return c;
}
}  // namespace

Trainer::Trainer(TrainOptions opts, std::shared_ptr<models::Gpt2Model> model, std::unique_ptr<BatchSource> train_data,
                 std::function<std::unique_ptr<BatchSource>()> make_valid_data)
    : opts_(std::move(opts)),
      model_(std::move(model)),
      train_data_(std::move(train_data)),
      make_valid_data_(std::move(make_valid_data)),
      optimizer_(make_optimizer(opts_, *model_)),
      scheduler_(scheduler_registry().create(opts_.scheduler.name, scheduler_config(opts_))) {
  MF_CHECK(opts_.train_iter > 0 && opts_.micro_batch > 0 && opts_.accumulation_steps > 0, "trainer: train.train_iter (",
           opts_.train_iter, "), train.train_micro_batch_size (", opts_.micro_batch,
           ") and train.num_accumulation_steps (", opts_.accumulation_steps, ") must be positive");
}

Trainer::~Trainer() = default;

void Trainer::set_data_parallel(std::shared_ptr<comm::Communicator> dp) {
  MF_CHECK(dp != nullptr, "trainer: set_data_parallel without a communicator");
  MF_CHECK(iter_ == 0 && !reducer_, "trainer: set_data_parallel must be called once, before train()");
  if (dp->size() == 1) return;
  dp->set_timeout_seconds(opts_.dist_timeout_seconds);
  dp_ = std::move(dp);
  reducer_ = std::make_unique<dist::GradReducer>(model_->parameters(), dp_, opts_.grad_bucket_bytes);
}

double Trainer::mean_over_dp(double local) {
  if (!dp_) return local;
  Tensor t = full({1}, local, DType::kF64);
  dp_->all_reduce(t)->wait();
  return t.data<double>()[0] / static_cast<double>(dp_->size());
}

void Trainer::barrier() {
  if (dp_) dp_->barrier()->wait();
}

void Trainer::run_hooks(const std::function<void(HookBase&)>& f) {
  for (auto& h : hooks_) f(*h);
}

StepStats Trainer::train_step() {
  auto t0 = std::chrono::steady_clock::now();
  allocator_for(cpu_device()).reset_peak();
  model_->train();
  optimizer_->zero_grad();
  double lr = scheduler_.lr_at(iter_);
  optimizer_->set_lr(lr);
  double loss_sum = 0.0;
  const uint64_t comm_bytes0 = dp_ ? dp_->stats().total_bytes() : 0;
  for (int64_t micro = 0; micro < opts_.accumulation_steps; ++micro) {
    auto [ids, labels] = train_data_->next(opts_.micro_batch);
    // This rank's rows [r * mb, (r + 1) * mb) of the global micro-batch: dropout draws theirs.
    std::optional<BatchSliceGuard> slice;
    if (dp_) slice.emplace(dp_rank() * opts_.micro_batch, dp_size() * opts_.micro_batch);
    Tensor loss = model_->loss(ids, labels);
    loss_sum += loss.item();
    if (reducer_ && micro + 1 == opts_.accumulation_steps) reducer_->prepare();  // the gradients become final
    scale(loss, 1.0 / static_cast<double>(opts_.accumulation_steps)).backward();
  }
  double exposed = 0;
  if (reducer_) {
    reducer_->finish();
    exposed = reducer_->last_timeline().exposed_s();
    loss_sum = mean_over_dp(loss_sum);
  }
  double grad_norm = optim::clip_grad_norm(model_->parameters(), opts_.clip_grad_max_norm);
  optimizer_->step();
  ++iter_;
  StepStats s;
  s.iter = iter_;
  s.loss = loss_sum / static_cast<double>(opts_.accumulation_steps);
  s.lr = lr;
  s.grad_norm = grad_norm;
  s.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.tokens_per_sec = static_cast<double>(tokens_per_step()) / s.step_seconds;
  s.mfu = s.tokens_per_sec * model_->flops_per_token(opts_.seq_length) / peak_flops_;
  s.peak_bytes = allocator_for(cpu_device()).stats().peak_bytes;
  s.comm_bytes = dp_ ? static_cast<int64_t>(dp_->stats().total_bytes() - comm_bytes0) : 0;
  s.exposed_comm_s = exposed;
  return s;
}

EvalStats Trainer::evaluate() {
  NoGradGuard ng;
  model_->eval();
  std::unique_ptr<BatchSource> data = make_valid_data_();
  double total = 0.0;
  for (int64_t i = 0; i < opts_.eval_iter; ++i) {
    auto [ids, labels] = data->next(opts_.eval_micro_batch);
    total += model_->loss(ids, labels).item();
  }
  model_->train();
  EvalStats e;
  e.iter = iter_;
  e.loss = mean_over_dp(total / static_cast<double>(std::max<int64_t>(1, opts_.eval_iter)));
  e.perplexity = std::exp(e.loss);
  return e;
}

void Trainer::train() {
  fs::create_directories(opts_.output_dir);
  fs::path cfg = fs::path(opts_.output_dir) / "config.yaml";
  bool has_run = fs::exists(cfg) || fs::exists(fs::path(opts_.output_dir) / "checkpoints");
  barrier();  // every rank has looked before the main rank writes
  if (opts_.resume) {
    load_latest_checkpoint();
  } else {
    MF_CHECK(!has_run, "train.output_dir '", opts_.output_dir,
             "' already holds a run (config.yaml or checkpoints); pass train.resume=true to continue it or choose "
             "another train.output_dir");
    manual_seed(opts_.seed);
  }
  if (!opts_.config_yaml.empty() && is_main_rank()) write_file_atomic(cfg.string(), opts_.config_yaml);
  peak_flops_ = measured_peak_flops() * static_cast<double>(dp_size());
  run_hooks([&](HookBase& h) { h.before_train(*this); });
  while (iter_ < opts_.train_iter) {
    StepStats s = train_step();
    run_hooks([&](HookBase& h) { h.after_step(*this, s); });
    bool exiting = opts_.exit_iter > 0 && iter_ == opts_.exit_iter;
    bool last = iter_ == opts_.train_iter || exiting;
    if (opts_.eval_enabled && ((opts_.eval_period > 0 && iter_ % opts_.eval_period == 0) || last)) {
      EvalStats e = evaluate();
      run_hooks([&](HookBase& h) { h.after_eval(*this, e); });
    }
    if ((opts_.checkpoint_period > 0 && iter_ % opts_.checkpoint_period == 0) || last) save_checkpoint();
    if (exiting) break;
  }
  run_hooks([&](HookBase& h) { h.after_train(*this); });
}

void Trainer::save_checkpoint() {
  // Parameters and optimizer state are replicated over dp: the main rank writes them; the
  // barrier keeps the others from running ahead of a checkpoint that is not complete yet.
  if (!is_main_rank()) {
    barrier();
    return;
  }
  TrainingState st;
  st.iter = iter_;
  st.optimizer_steps = optimizer_->step_count();
  st.data_position = train_data_->position();
  st.rng = default_generator().state();
  write_checkpoint(opts_.output_dir, st, model_->state_dict(), optimizer_->state_tensors(), opts_.max_to_keep);
  barrier();
}

bool Trainer::load_latest_checkpoint() {
  auto loaded = read_latest_checkpoint(opts_.output_dir);
  if (!loaded) {
    manual_seed(opts_.seed);
    return false;
  }
  model_->load_state_dict(loaded->model);
  nn::NamedTensors mine = optimizer_->state_tensors();
  MF_CHECK(mine.size() == loaded->optimizer.size(), "checkpoint ", loaded->dir, ": optimizer state has ",
           loaded->optimizer.size(), " tensors, the ", optimizer_->name(), " optimizer expects ", mine.size());
  {
    NoGradGuard ng;
    for (size_t i = 0; i < mine.size(); ++i) {
      MF_CHECK(mine[i].first == loaded->optimizer[i].first && mine[i].second.shape() == loaded->optimizer[i].second.shape(),
               "checkpoint ", loaded->dir, ": optimizer state '", loaded->optimizer[i].first, "' does not match '",
               mine[i].first, "'");
      copy_(mine[i].second, loaded->optimizer[i].second);
    }
  }
  optimizer_->set_step_count(loaded->state.optimizer_steps);
  iter_ = loaded->state.iter;
  train_data_->set_position(loaded->state.data_position);
  default_generator().set_state(loaded->state.rng);
  return true;
}

}  // namespace mf::train
