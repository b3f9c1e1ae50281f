#include "meshflow/train/trainer.h"

#include <cmath>
#include <optional>

#include "meshflow/comm/watchdog.h"
#include "meshflow/core/trace.h"
#include "meshflow/parallel/context.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/runtime/components.h"
#include "meshflow/train/evaluation.h"
#include "meshflow/train/stop_signal.h"

namespace mf::train {

namespace {
optim::LossScalerOptions scaler_options(const TrainOptions& o, const models::Model& m) {
  optim::LossScalerOptions s = o.loss_scaler;
  s.enabled = m.param_dtype() == DType::kF16;  // bf16 has f32's range: no scaling
  return s;
}

optim::SchedulerConfig scheduler_config(const TrainOptions& o) {
  optim::SchedulerConfig c = o.scheduler;
  c.base_lr = o.lr;
  c.total_iters = o.train_iter;
  return c;
}

Device model_device(const models::Model& m) {
  const std::vector<Tensor> params = m.parameters();
  const Device d = params.empty() ? cpu_device() : params[0].device();
  for (const Tensor& p : params)
    MF_CHECK(p.device() == d, "trainer: the model's parameters are on ", d.str(), " and ", p.device().str(),
             "; move the whole model (Module::to_device) before training");
  return d;
}
}  // namespace

Trainer::Trainer(TrainOptions opts, std::shared_ptr<models::Model> model, std::unique_ptr<BatchSource> train_data,
                 std::function<std::unique_ptr<BatchSource>()> make_valid_data, parallel::NamedGroups groups)
    : opts_(std::move(opts)),
      model_(std::move(model)),
      train_data_(std::move(train_data)),
      make_valid_data_(std::move(make_valid_data)),
      groups_(std::move(groups)),
      executor_(*model_, groups_, model_device(*model_)),
      scheduler_(runtime::scheduler_registry().create(opts_.scheduler.name, scheduler_config(opts_))),
      device_(model_device(*model_)),
      scaler_(scaler_options(opts_, *model_)) {
  MF_CHECK(opts_.train_iter > 0 && opts_.micro_batch > 0 && opts_.accumulation_steps > 0, "trainer: train.train_iter (",
           opts_.train_iter, "), train.train_micro_batch_size (", opts_.micro_batch,
           ") and train.num_accumulation_steps (", opts_.accumulation_steps, ") must be positive");
  parallel::check_layer_groups(groups_, model_->place());
  build_sync();
}

Trainer::~Trainer() = default;

void Trainer::build_sync() {
  const std::vector<nn::ParamLayout> layouts = model_->parameter_layouts();
  std::vector<bool> split(layouts.size());
  for (size_t k = 0; k < layouts.size(); ++k) split[k] = !layouts[k].replicated();
  const parallel::GradSyncOptions o{.bucket_bytes = opts_.grad_bucket_bytes, .zero_stage = static_cast<int>(opts_.zero_stage),
                                    .norm_type = opts_.clip_grad_norm_type, .device = device_};
  sync_.reset();  // a previous one's hooks and shards go first
  sync_ = std::make_unique<parallel::GradSync>(model_->named_parameters(), split, model_->parameter_units(),
                                               model_->tied_parameters(), groups_, o);
  model_->set_param_use_hooks(sync_->param_use_hooks());
  auto groups = sync_->optimizer_groups(optim::default_param_groups(*model_, opts_.weight_decay));
  optimizer_ = runtime::optimizer_registry().create(opts_.optim, std::move(groups), opts_);
  executor_ = PipelineExecutor(*model_, groups_, device_);
}

void Trainer::set_parallel(std::shared_ptr<comm::Communicator> dp, std::shared_ptr<comm::Communicator> all,
                           std::shared_ptr<comm::Communicator> pp, std::shared_ptr<comm::Communicator> world) {
  std::vector<std::pair<std::string, comm::CommPtr>> named{
      {"dp", std::move(dp)}, {"stage", std::move(all)}, {"pp", std::move(pp)}, {"world", std::move(world)}};
  for (const layers::PlaceDim& d : model_->place().dims()) named.emplace_back(d.name, d.comm);
  set_groups(parallel::make_groups(named, opts_.dist_timeout_seconds));
}

void Trainer::set_groups(parallel::NamedGroups groups) {
  MF_CHECK(iter_ == 0 && !groups_.everyone(), "trainer: the parallel groups are set once, before train()");
  parallel::check_layer_groups(groups, model_->place());
  groups_ = std::move(groups);
  build_sync();
}

void Trainer::run_hooks(const std::function<void(HookBase&)>& f) {
  for (auto& h : hooks_) f(*h);
}

StepStats Trainer::train_step() {
  const trace::Scope span =
      trace::enabled() ? trace::Scope("step", "step " + std::to_string(iter_ + 1), "\"step\":" + std::to_string(iter_ + 1))
                       : trace::Scope();
  StepStats s;
  const uint64_t comm_bytes0 = begin_step(s);
  const std::vector<PipelineExecutor::Batch> batches = next_batches();
  const std::vector<double> totals = loss_totals(batches);
  // fp16: the seed carries the loss scale (every gradient comes out scale x the true one). The
  // gradient reduction averages over the dp ranks, whose losses add up to the step's (the tp
  // ranks share the seed in the loss head: Model::seed_share).
  s.loss_scale = scaler_.scale();
  const double seed = s.loss_scale * static_cast<double>(dp_size());
  const auto schedule = parallel::parse_pipeline_schedule(opts_.pipeline_schedule);
  const double loss_sum = executor_.train(batches, totals, schedule, opts_.seq_length, seed, [&] { sync_->prepare(); });
  s.exposed_comm_s = finish_grad_sync();
  s.loss = parallel::sum_over(groups_.get("dp"), parallel::sum_over(groups_.get("pp"), loss_sum));
  update(s);
  s.iter = ++iter_;
  finish_stats(s, comm_bytes0);
  return s;
}

uint64_t Trainer::begin_step(StepStats& s) {
  meter_.begin_step();
  allocator_for(device_).reset_peak();
  sync_->reset_buffer_peak();
  model_->train();
  for (Tensor& p : model_->parameters()) p.zero_grad();  // the model's own (ZeRO's optimizer holds slices)
  // The schedule follows the updates made (equal to iter_ unless fp16 skipped some: Megatron's rule).
  s.lr = scheduler_.lr_at(optimizer_->step_count());
  optimizer_->set_lr(s.lr);
  return sync_->comm_bytes();
}

std::vector<PipelineExecutor::Batch> Trainer::next_batches() {
  // Every stage reads the step's micro-batches (the first uses the ids, the last the labels), so
  // the sampler position stays the same everywhere. Host tensors: the embedding checks the ids and
  // uploads them asynchronously, the loss head reads the labels on the host.
  std::vector<PipelineExecutor::Batch> batches;
  for (int64_t i = 0; i < opts_.accumulation_steps; ++i) batches.push_back(train_data_->next(opts_.micro_batch));
  return batches;
}

std::vector<double> Trainer::loss_totals(const std::vector<PipelineExecutor::Batch>& batches) const {
  // Each loss term's items over the whole step (every micro-batch of every data-parallel rank):
  // the micro-batch losses are shares of the global batch's mean (Model::loss_counts()), so
  // padding and masking weigh the same under every layout.
  std::vector<double> totals;
  for (const PipelineExecutor::Batch& b : batches) {
    const std::vector<double> n = model_->loss_counts(b);
    if (totals.empty()) totals.assign(n.size(), 0.0);
    for (size_t k = 0; k < n.size(); ++k) totals[k] += n[k];
  }
  return parallel::sum_over(groups_.get("dp"), totals);
}

double Trainer::finish_grad_sync() {
  const trace::Scope phase = trace::enabled() ? trace::Scope("grad_sync", "gradient reduction") : trace::Scope();
  return sync_->finish();
}

void Trainer::update(StepStats& s) {
  // Mixed precision: gradients with an inf or NaN on any rank skip the update (parameters,
  // optimizer state and its step count unchanged; the iteration and the data advance), as
  // Megatron-LM does for fp16; bf16 skips such a step too rather than poison the weights.
  std::optional<trace::Scope> phase;
  if (trace::enabled()) phase.emplace("optimizer", "clip and update");
  const parallel::GradSync::Clipping clipping = sync_->clip(opts_.clip_grad_max_norm, s.loss_scale);
  s.grad_norm = clipping.norm;
  // Full precision has no overflow to skip: a non-finite loss or gradient stops the run before the
  // update, so that no checkpoint of such weights is written and the last complete one stays the
  // newest (the loss and the norm are the same on every rank: every rank stops here).
  MF_CHECK(mixed_precision() || (std::isfinite(s.loss) && std::isfinite(s.grad_norm)), "iteration ", iter_ + 1,
           ": the loss is ", s.loss, " and the gradient norm ", s.grad_norm, "; stopped before the update (the newest "
           "checkpoint is kept as it is). Lower optim.lr, keep optim.clip_grad_max_norm > 0, or check the data");
  s.skipped = mixed_precision() && parallel::any_over(groups_.everyone(), !std::isfinite(s.grad_norm));
  if (!s.skipped) {
    optimizer_->set_grad_scale(clipping.factor / s.loss_scale);
    sync_->update(*optimizer_);
  } else {
    ++skipped_iters_;
  }
  scaler_.update(s.skipped);
  s.skipped_iters = skipped_iters_;
}

void Trainer::finish_stats(StepStats& s, uint64_t comm_bytes0) {
  meter_.end_step(s, tokens_per_step(), model_->flops_per_token(opts_.seq_length));
  s.peak_bytes = allocator_for(device_).stats().peak_bytes;
  s.memory = memory_report(*sync_, *optimizer_, s.peak_bytes);
  s.comm_bytes_est = static_cast<int64_t>(sync_->comm_bytes() - comm_bytes0);
  if (log_step(iter_)) {
    meter_.end_period(s);
    s.ranks = gather_rank_stats(s, executor_.last_stats().wait_seconds, groups_);
  }
}

EvalStats Trainer::evaluate() {
  EvalStats e = evaluate_batches(*model_, executor_, make_valid_data_, opts_.eval_iter, opts_.eval_micro_batch, groups_);
  e.iter = iter_;
  return e;
}

void Trainer::train() {
  // SIGTERM, SIGINT and SIGUSR1 ask the run to stop after the current step, with a checkpoint.
  const StopOnSignal stop_on_signal;
  stop_signal_ = 0;
  run_folder_.open(opts_, groups_);
  resume_or_seed(state_refs());
  run_folder_.write_configs(opts_, groups_);
  meter_.start(device_, model_->param_dtype(), groups_.dims().product());
  run_hooks([&](HookBase& h) { h.before_train(*this); });
  while (iter_ < opts_.train_iter) {
    comm::note_step(iter_ + 1);
    run_hooks([&](HookBase& h) { h.before_step(*this); });
    StepStats s = train_step();
    run_hooks([&](HookBase& h) { h.after_step(*this, s); });
    const bool exiting = opts_.exit_iter > 0 && iter_ == opts_.exit_iter, last = iter_ == opts_.train_iter || exiting;
    // A stop signal on any rank stops every rank after this step: they agree on it here.
    const int stop = last ? 0 : static_cast<int>(parallel::max_over(groups_.everyone(), StopOnSignal::received()));
    if (stop != 0) {
      stop_signal_ = stop;
      save_at_stop(state_refs(), stop);
      break;
    }
    if (opts_.eval_enabled && ((opts_.eval_period > 0 && iter_ % opts_.eval_period == 0) || last)) {
      const EvalStats e = [&] {
        const trace::Scope phase = trace::enabled() ? trace::Scope("eval", "evaluation") : trace::Scope();
        return evaluate();
      }();
      run_hooks([&](HookBase& h) { h.after_eval(*this, e); });
    }
    if ((opts_.checkpoint_period > 0 && iter_ % opts_.checkpoint_period == 0) || last) {
      const trace::Scope phase = trace::enabled() ? trace::Scope("checkpoint", "checkpoint save") : trace::Scope();
      save_checkpoint();
    }
    if (exiting) break;
  }
  run_hooks([&](HookBase& h) { h.after_train(*this); });
  run_folder_.stop_watchdog();  // this rank finished: peers stop watching it
}

TrainingStateRefs Trainer::state_refs() {
  return {opts_,   groups_, *model_, *sync_,        *optimizer_, *train_data_,
          scaler_, iter_,   skipped_iters_, global_batch_size()};
}

void Trainer::save_checkpoint() { train::save_checkpoint(state_refs()); }

bool Trainer::load_latest_checkpoint() { return train::load_latest_checkpoint(state_refs()); }

}  // namespace mf::train
