#include "meshflow/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <unordered_map>

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

void Trainer::set_parallel(std::shared_ptr<comm::Communicator> dp, std::shared_ptr<comm::Communicator> all) {
  MF_CHECK(iter_ == 0 && !reducer_ && !replicated_reducer_ && !all_, "trainer: set_parallel must be called once, before train()");
  const nn::TensorParallel& tp = model_->tensor_parallel();
  for (auto* c : {dp.get(), all.get()})
    if (c) c->set_timeout_seconds(opts_.dist_timeout_seconds);
  if (tp.comm) tp.comm->set_timeout_seconds(opts_.dist_timeout_seconds);
  if (all && all->size() > 1) all_ = std::move(all);
  if (dp && dp->size() > 1) dp_ = std::move(dp);
  std::vector<Tensor> params = model_->parameters();
  std::vector<nn::ParamLayout> layouts = model_->parameter_layouts();
  split_.assign(params.size(), false);
  if (!tp.enabled()) {
    if (dp_) reducer_ = std::make_unique<dist::GradReducer>(params, dp_, opts_.grad_bucket_bytes);
    return;
  }
  // Split parameters: exact local gradients, averaged over dp. Replicated ones: partial sums
  // over tp (each tp rank saw loss / tp), so summed over dp x tp and divided by dp.
  MF_CHECK(all_ != nullptr && all_->size() == dp_size() * tp.size(), "trainer: the group of all ranks (",
           all_ ? all_->size() : 1, ") must be data_parallel_size x tensor_parallel_size = ", dp_size() * tp.size());
  std::vector<Tensor> split, replicated;
  for (size_t i = 0; i < params.size(); ++i) {
    split_[i] = !layouts[i].replicated();
    (split_[i] ? split : replicated).push_back(params[i]);
  }
  const double mean = 1.0 / static_cast<double>(dp_size());
  if (dp_ && !split.empty()) reducer_ = std::make_unique<dist::GradReducer>(split, dp_, opts_.grad_bucket_bytes, mean);
  if (!replicated.empty())
    replicated_reducer_ = std::make_unique<dist::GradReducer>(replicated, all_, opts_.grad_bucket_bytes, mean);
}

uint64_t Trainer::comm_bytes() const {
  uint64_t n = 0;
  for (const auto* c : {dp_.get(), all_.get(), model_->tensor_parallel().comm.get()})
    if (c) n += c->stats().total_bytes();
  return n;
}

double Trainer::clip_gradients() {
  const nn::TensorParallel& tp = model_->tensor_parallel();
  if (!tp.enabled()) return optim::clip_grad_norm(model_->parameters(), opts_.clip_grad_max_norm);
  // The logical norm: split pieces' squares summed over tp, replicated ones counted once.
  NoGradGuard ng;
  std::vector<Tensor> params = model_->parameters();
  double split_ss = 0, replicated_ss = 0;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].grad().defined()) (split_[i] ? split_ss : replicated_ss) += sum_squares(params[i].grad()).item();
  Tensor t = full({1}, split_ss, DType::kF64);
  tp.comm->all_reduce(t)->wait();
  const double norm = std::sqrt(t.data<double>()[0] + replicated_ss);
  const double max_norm = opts_.clip_grad_max_norm;
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    for (const Tensor& p : params)
      if (p.grad().defined()) {
        Tensor g = p.grad();
        scale_(g, max_norm / (norm + 1e-6));
      }
  return norm;
}

namespace {
// The parameter a state entry belongs to: "<param>" or "<param>.<optimizer slot>".
const nn::ParamLayout* layout_of(const std::string& name, const std::unordered_map<std::string, nn::ParamLayout>& by_name) {
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos) it = by_name.find(name.substr(0, dot));
  }
  return it == by_name.end() ? nullptr : &it->second;
}

std::unordered_map<std::string, nn::ParamLayout> layouts_by_name(const models::Gpt2Model& m) {
  std::unordered_map<std::string, nn::ParamLayout> r;
  auto layouts = m.parameter_layouts();
  auto named = m.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) r.emplace(named[i].first, layouts[i]);
  return r;
}
}  // namespace

nn::NamedTensors Trainer::logical_state(const nn::NamedTensors& local) {
  const nn::TensorParallel& tp = model_->tensor_parallel();
  if (!tp.enabled()) return local;
  auto by_name = layouts_by_name(*model_);
  nn::NamedTensors out;
  for (const auto& [name, t] : local) {
    const nn::ParamLayout* l = layout_of(name, by_name);
    out.emplace_back(name, l ? nn::gather_logical(t, *l, tp) : t);
  }
  return out;
}

nn::NamedTensors Trainer::local_state(const nn::NamedTensors& logical) {
  const nn::TensorParallel& tp = model_->tensor_parallel();
  if (!tp.enabled()) return logical;
  auto by_name = layouts_by_name(*model_);
  nn::NamedTensors out;
  for (const auto& [name, t] : logical) {
    const nn::ParamLayout* l = layout_of(name, by_name);
    out.emplace_back(name, l ? nn::slice_local(t, *l, tp) : t);
  }
  return out;
}

double Trainer::mean_over_dp(double local) {
  if (!dp_) return local;
  Tensor t = full({1}, local, DType::kF64);
  dp_->all_reduce(t)->wait();
  return t.data<double>()[0] / static_cast<double>(dp_->size());
}

void Trainer::barrier() {
  if (all_) all_->barrier()->wait();
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
  const uint64_t comm_bytes0 = comm_bytes();
  // A loss replicated on the tp ranks counts once: each rank backpropagates loss / tp.
  const double backward_scale = 1.0 / static_cast<double>(opts_.accumulation_steps * tp_size());
  for (int64_t micro = 0; micro < opts_.accumulation_steps; ++micro) {
    auto [ids, labels] = train_data_->next(opts_.micro_batch);
    // This rank's rows [r * mb, (r + 1) * mb) of the global micro-batch: dropout draws theirs.
    std::optional<BatchSliceGuard> slice;
    if (dp_) slice.emplace(dp_rank() * opts_.micro_batch, dp_size() * opts_.micro_batch);
    Tensor loss = model_->loss(ids, labels);
    loss_sum += loss.item();
    if (micro + 1 == opts_.accumulation_steps)  // the gradients become final in this backward
      for (auto* r : {reducer_.get(), replicated_reducer_.get()})
        if (r) r->prepare();
    scale(loss, backward_scale).backward();
  }
  double exposed = 0;
  for (auto* r : {reducer_.get(), replicated_reducer_.get()})
    if (r) {
      r->finish();
      exposed += r->last_timeline().exposed_s();
    }
  loss_sum = mean_over_dp(loss_sum);
  double grad_norm = clip_gradients();
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
  s.comm_bytes = static_cast<int64_t>(comm_bytes() - comm_bytes0);
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
  peak_flops_ = measured_peak_flops() * static_cast<double>(dp_size() * tp_size());
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
  // Split parameters and their optimizer state are gathered to the checkpoint layout first.
  nn::NamedTensors model_state = logical_state(model_->state_dict());
  nn::NamedTensors optim_state = logical_state(optimizer_->state_tensors());
  if (!is_main_rank()) {
    barrier();
    return;
  }
  TrainingState st;
  st.iter = iter_;
  st.optimizer_steps = optimizer_->step_count();
  st.data_position = train_data_->position();
  st.rng = default_generator().state();
  write_checkpoint(opts_.output_dir, st, model_state, optim_state, opts_.max_to_keep);
  barrier();
}

bool Trainer::load_latest_checkpoint() {
  auto loaded = read_latest_checkpoint(opts_.output_dir);
  if (!loaded) {
    manual_seed(opts_.seed);
    return false;
  }
  model_->load_state_dict(local_state(loaded->model));
  loaded->optimizer = local_state(loaded->optimizer);
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
