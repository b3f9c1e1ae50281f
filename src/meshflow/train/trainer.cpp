#include "meshflow/train/trainer.h"

#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <filesystem>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/comm/watchdog.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/core/file_lock.h"
#include "meshflow/core/trace.h"
#include "meshflow/ops/ops.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/tensor/storage.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/runtime/components.h"
#include "meshflow/runtime/peak_flops.h"
#include "meshflow/train/state_slots.h"
#include "meshflow/train/stop_signal.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace mf::train {

namespace fs = std::filesystem;

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
  check_model_groups(groups_);
  build_sync();
}

void Trainer::check_model_groups(const parallel::NamedGroups& groups) const {
  MF_CHECK(groups.ptr("tp") == (model_->tensor_parallel().enabled() ? model_->tensor_parallel().comm : nullptr),
           "trainer: the groups' tensor-parallel group is not the model's");
}

Trainer::~Trainer() = default;

void Trainer::build_sync() {
  const std::vector<nn::ParamLayout> layouts = model_->parameter_layouts();
  std::vector<bool> split(layouts.size());
  for (size_t k = 0; k < layouts.size(); ++k) split[k] = !layouts[k].replicated();
  parallel::GradSyncOptions o;
  o.bucket_bytes = opts_.grad_bucket_bytes;
  o.zero_stage = static_cast<int>(opts_.zero_stage);
  o.norm_type = opts_.clip_grad_norm_type;
  o.device = device_;
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
  set_groups(parallel::make_groups({{"dp", std::move(dp)},
                                    {"tp", model_->tensor_parallel().comm},
                                    {"stage", std::move(all)},
                                    {"pp", std::move(pp)},
                                    {"world", std::move(world)}},
                                   opts_.dist_timeout_seconds));
}

void Trainer::set_groups(parallel::NamedGroups groups) {
  MF_CHECK(iter_ == 0 && !groups_.everyone(), "trainer: the parallel groups are set once, before train()");
  check_model_groups(groups);
  groups_ = std::move(groups);
  build_sync();
}

MemoryReport Trainer::memory_report(int64_t peak) const {
  // Each buffer counted once, by what first names it: parameters (the model's, and ZeRO's
  // slices), then gradients, then optimizer state; released ZeRO-3 parameters count 0.
  MemoryReport m;
  std::unordered_map<const Storage*, bool> seen;
  auto count = [&](const Tensor& t, int64_t& into) {
    if (!t.defined()) return;
    const Storage* st = t.impl()->storage.get();
    if (seen.emplace(st, true).second) into += static_cast<int64_t>(st->resident_nbytes());
  };
  sync_->count_memory(count, m.parameters, m.gradients);
  for (const auto& [name, t] : optimizer_->state_tensors()) count(t, m.optimizer_state);
  m.comm_buffers = sync_->buffer_peak_bytes();
  m.peak = peak;
  m.activations = std::max<int64_t>(0, peak - m.parameters - m.gradients - m.optimizer_state);
  return m;
}

runtime::PeakFlops Trainer::device_peak_flops() const {
#if MESHFLOW_WITH_CUDA
  // The chip's dense peak for the arithmetic the model runs: tensor cores for bf16/f16 models.
  if (device_.type == DeviceType::kCUDA)
    return {cuda::peak_flops(device_.index, model_->param_dtype()), "the GPU's dense peak from its data sheet"};
#endif
  return runtime::cpu_peak_flops();
}

void Trainer::run_hooks(const std::function<void(HookBase&)>& f) {
  for (auto& h : hooks_) f(*h);
}

StepStats Trainer::train_step() {
  const trace::Scope span =
      trace::enabled() ? trace::Scope("step", "step " + std::to_string(iter_ + 1), "\"step\":" + std::to_string(iter_ + 1))
                       : trace::Scope();
  auto t0 = std::chrono::steady_clock::now();
  const double waited0 = comm::comm_wait_seconds();
  allocator_for(device_).reset_peak();
  sync_->reset_buffer_peak();
  model_->train();
  for (Tensor& p : model_->parameters()) p.zero_grad();  // the model's own (ZeRO's optimizer holds slices)
  // The schedule follows the updates made (equal to iter_ unless fp16 skipped some: Megatron's rule).
  const double lr = scheduler_.lr_at(optimizer_->step_count());
  optimizer_->set_lr(lr);
  const uint64_t comm_bytes0 = sync_->comm_bytes();
  // Every stage reads the step's micro-batches (the first uses the ids, the last the labels), so
  // the sampler position stays the same everywhere. Host tensors: the embedding checks the ids and
  // uploads them asynchronously, the loss head reads the labels on the host.
  std::vector<PipelineExecutor::Batch> batches;
  for (int64_t i = 0; i < opts_.accumulation_steps; ++i) batches.push_back(train_data_->next(opts_.micro_batch));
  // Each loss term's items over the whole step (every micro-batch of every data-parallel rank):
  // the micro-batch losses are shares of the global batch's mean (Model::loss_counts()), so
  // padding and masking weigh the same under every layout.
  std::vector<double> totals;
  for (const PipelineExecutor::Batch& b : batches) {
    const std::vector<double> n = model_->loss_counts(b);
    if (totals.empty()) totals.assign(n.size(), 0.0);
    for (size_t k = 0; k < n.size(); ++k) totals[k] += n[k];
  }
  totals = parallel::sum_over(groups_.get("dp"), totals);
  // fp16: the seed carries the loss scale (every gradient comes out scale x the true one). The
  // gradient reduction averages over the data-parallel ranks, whose losses add up to the step's.
  const double loss_scale = scaler_.scale();
  const double backward_scale = loss_scale * static_cast<double>(dp_size()) / static_cast<double>(tp_size());
  const auto schedule = parallel::parse_pipeline_schedule(opts_.pipeline_schedule);
  double loss_sum =
      executor_.train(batches, totals, schedule, opts_.seq_length, backward_scale, [&] { sync_->prepare(); });
  double exposed = 0;
  {
    const trace::Scope phase = trace::enabled() ? trace::Scope("grad_sync", "gradient reduction") : trace::Scope();
    exposed = sync_->finish();
  }
  loss_sum = parallel::sum_over(groups_.get("dp"), parallel::sum_over(groups_.get("pp"), loss_sum));
  // Mixed precision: gradients with an inf or NaN on any rank skip the update (parameters,
  // optimizer state and its step count unchanged; the iteration and the data advance), as
  // Megatron-LM does for fp16; bf16 skips such a step too rather than poison the weights.
  std::optional<trace::Scope> phase;
  if (trace::enabled()) phase.emplace("optimizer", "clip and update");
  const parallel::GradSync::Clipping clipping = sync_->clip(opts_.clip_grad_max_norm, loss_scale);
  const double grad_norm = clipping.norm;
  // Full precision has no overflow to skip: a non-finite loss or gradient stops the run before the
  // update, so that no checkpoint of such weights is written and the last complete one stays the
  // newest (the loss and the norm are the same on every rank: every rank stops here).
  MF_CHECK(mixed_precision() || (std::isfinite(loss_sum) && std::isfinite(grad_norm)), "iteration ", iter_ + 1,
           ": the loss is ", loss_sum, " and the gradient norm ", grad_norm, "; stopped before the update (the newest "
           "checkpoint is kept as it is). Lower optim.lr, keep optim.clip_grad_max_norm > 0, or check the data");
  const bool skip = mixed_precision() && parallel::any_over(groups_.everyone(), !std::isfinite(grad_norm));
  if (!skip) {
    optimizer_->set_grad_scale(clipping.factor / loss_scale);
    sync_->update(*optimizer_);
  } else {
    ++skipped_iters_;
  }
  scaler_.update(skip);
  phase.reset();
  ++iter_;
  StepStats s;
  s.iter = iter_;
  s.loss = loss_sum;
  s.lr = lr;
  s.grad_norm = grad_norm;
  s.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.comm_wait_s = comm::comm_wait_seconds() - waited0;
  period_step_s_ += s.step_seconds;
  period_wait_s_ += s.comm_wait_s;
  ++period_steps_;
  s.tokens_per_sec = static_cast<double>(tokens_per_step()) / s.step_seconds;
  const double achieved_flops = s.tokens_per_sec * model_->flops_per_token(opts_.seq_length);
  const double ranks = static_cast<double>(groups_.dims().product());
  std::function<double()> remeasure;  // a GPU's peak is its data sheet's: nothing to measure again
  if (device_.type == DeviceType::kCPU) remeasure = [ranks] { return runtime::measure_peak_flops_now() * ranks; };
  s.peak_note = peak_.observe(achieved_flops, remeasure);
  s.mfu = peak_.mfu(achieved_flops);
  s.peak_bytes = allocator_for(device_).stats().peak_bytes;
  s.memory = memory_report(s.peak_bytes);
  s.comm_bytes_est = static_cast<int64_t>(sync_->comm_bytes() - comm_bytes0);
  s.exposed_comm_s = exposed;
  s.loss_scale = loss_scale;
  s.skipped = skip;
  s.skipped_iters = skipped_iters_;
  if (log_step(iter_)) {
    s.mean_step_s = period_step_s_ / static_cast<double>(period_steps_);
    s.mean_comm_wait_s = period_wait_s_ / static_cast<double>(period_steps_);
    period_step_s_ = period_wait_s_ = 0;
    period_steps_ = 0;
    s.ranks = gather_rank_stats(s);
  }
  return s;
}

std::vector<RankStepStats> Trainer::gather_rank_stats(const StepStats& s) const {
  comm::Communicator* everyone = groups_.everyone();
  const int n = everyone ? everyone->size() : 1, me = everyone ? everyone->rank() : 0;
  const MemoryReport& m = s.memory;
  // Each rank's row: its figures, then its coordinate; the sum over every rank gathers the rows.
  std::vector<double> mine = {s.step_seconds, s.exposed_comm_s, executor_.last_stats().wait_seconds,
                              static_cast<double>(m.parameters), static_cast<double>(m.gradients),
                              static_cast<double>(m.optimizer_state), static_cast<double>(m.activations),
                              static_cast<double>(m.comm_buffers), static_cast<double>(m.peak),
                              static_cast<double>(s.peak_bytes), s.comm_wait_s, s.mean_step_s, s.mean_comm_wait_s};
  const size_t figures = mine.size();
  for (int64_t c : groups_.coordinate()) mine.push_back(static_cast<double>(c));
  const size_t k = mine.size();
  std::vector<double> all(k * static_cast<size_t>(n), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(k * static_cast<size_t>(me)));
  all = parallel::sum_over(everyone, all);
  std::vector<RankStepStats> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const double* v = all.data() + k * static_cast<size_t>(r);
    RankStepStats& x = out[static_cast<size_t>(r)];
    x.rank = r;
    x.step_seconds = v[0];
    x.exposed_comm_s = v[1];
    x.pipeline_wait_s = v[2];
    x.memory = {static_cast<int64_t>(v[3]), static_cast<int64_t>(v[4]), static_cast<int64_t>(v[5]),
                static_cast<int64_t>(v[8]), static_cast<int64_t>(v[6]), static_cast<int64_t>(v[7])};
    x.peak_bytes = static_cast<int64_t>(v[9]);
    x.comm_wait_s = v[10];
    x.mean_step_s = v[11];
    x.mean_comm_wait_s = v[12];
    for (size_t i = figures; i < k; ++i) x.coordinate.push_back(static_cast<int64_t>(v[i]));
  }
  return out;
}

EvalStats Trainer::evaluate() {
  model_->eval();
  std::unique_ptr<BatchSource> data = make_valid_data_();
  double total = 0.0;
  const std::vector<std::string> names = model_->eval_metric_names();
  std::vector<double> sums(2 * names.size(), 0.0);  // (sum, count) of each metric
  for (int64_t i = 0; i < opts_.eval_iter; ++i) {
    const PipelineExecutor::Evaluation ev = executor_.evaluate(data->next(opts_.eval_micro_batch));
    total += ev.loss;
    for (size_t k = 0; k < names.size() && k < ev.metrics.size(); ++k) {
      sums[2 * k] += ev.metrics[k].first;
      sums[2 * k + 1] += ev.metrics[k].second;
    }
  }
  model_->train();
  EvalStats e;
  e.iter = iter_;
  const double mean = parallel::sum_over(groups_.get("pp"), total) / static_cast<double>(std::max<int64_t>(1, opts_.eval_iter));
  e.loss = parallel::mean_over(groups_.get("dp"), mean);
  e.perplexity = model_->batch_kind() == models::BatchKind::kCausalLM ? std::exp(e.loss)
                                                                     : std::numeric_limits<double>::quiet_NaN();
  if (!names.empty()) {
    sums = parallel::sum_over(groups_.get("dp"), parallel::sum_over(groups_.get("pp"), sums));
    for (size_t k = 0; k < names.size(); ++k) e.metrics.emplace_back(names[k], sums[2 * k] / std::max(1.0, sums[2 * k + 1]));
  }
  return e;
}

void Trainer::train() {
  // SIGTERM, SIGINT and SIGUSR1 ask the run to stop after the current step, with a checkpoint.
  const StopOnSignal stop_on_signal;
  stop_signal_ = 0;
  // A resume names a run that is there: a misspelled folder is not a new run.
  MF_CHECK(!opts_.resume || fs::is_directory(opts_.output_dir), "train.resume: train.output_dir '", opts_.output_dir,
           "' does not exist: there is no run to resume (check the path, or leave train.resume=false to start one)");
  make_folder(opts_.output_dir, "train.output_dir");
  // One run per folder: the main rank holds <output_dir>/.lock until the trainer goes; a second
  // run (or a resume started while the first still runs) stops here on every rank.
  const fs::path lock_path = fs::path(opts_.output_dir) / ".lock";
  std::string holder;
  if (is_main_rank() && !lock_) {
    lock_ = std::make_unique<FileLock>(lock_path.string());
    if (!lock_->locked()) {
      holder = lock_->holder().empty() ? std::string("another process") : lock_->holder();
      lock_.reset();
    }
  }
  MF_CHECK(!parallel::any_over(groups_.everyone(), !holder.empty()), "train.output_dir '", opts_.output_dir,
           "' is in use by another run (", lock_path.string(), " is locked by ", holder.empty() ? "it" : holder,
           "); wait for that run to end or choose another train.output_dir");
  // A dead or stopped peer ends the run with a line naming it, whatever the launcher does.
  if (opts_.heartbeat && groups_.everyone() != nullptr && groups_.everyone()->size() > 1 && !watchdog_)
    watchdog_ = std::make_unique<comm::Watchdog>(*groups_.everyone(), (fs::path(opts_.output_dir) / ".heartbeat").string(),
                                                 std::min(1.0, opts_.dist_timeout_seconds / 10),
                                                 opts_.dist_timeout_seconds / 2);
  fs::path cfg = fs::path(opts_.output_dir) / "config.yaml";
  bool has_run = fs::exists(cfg) || fs::exists(fs::path(opts_.output_dir) / "checkpoints");
  parallel::barrier(groups_.everyone());  // every rank has looked before the main rank writes
  if (opts_.resume) {
    if (!load_latest_checkpoint() && is_main_rank())
      std::fprintf(stderr, "meshflow: train.resume: no checkpoint in %s: starting from step 0\n",
                   (fs::path(opts_.output_dir) / "checkpoints").string().c_str());
  } else {
    MF_CHECK(!has_run, "train.output_dir '", opts_.output_dir,
             "' already holds a run (config.yaml or checkpoints); pass train.resume=true to continue it or choose "
             "another train.output_dir");
    manual_seed(opts_.seed);
  }
  if (!opts_.config_yaml.empty() && is_main_rank()) write_file_atomic(cfg.string(), opts_.config_yaml);
  if (!opts_.hf_config_json.empty() && is_main_rank())
    write_file_atomic((fs::path(opts_.output_dir) / "hf_config.json").string(), opts_.hf_config_json);
  runtime::PeakFlops peak = device_peak_flops();
  if (const int64_t ranks = groups_.dims().product(); ranks > 1) {
    peak.flops *= static_cast<double>(ranks);
    peak.source += detail::cat("; per rank, x ", ranks, " ranks");
  }
  peak_ = runtime::PeakTracker(std::move(peak));
  run_hooks([&](HookBase& h) { h.before_train(*this); });
  while (iter_ < opts_.train_iter) {
    comm::note_step(iter_ + 1);
    run_hooks([&](HookBase& h) { h.before_step(*this); });
    StepStats s = train_step();
    run_hooks([&](HookBase& h) { h.after_step(*this, s); });
    bool exiting = opts_.exit_iter > 0 && iter_ == opts_.exit_iter;
    bool last = iter_ == opts_.train_iter || exiting;
    // A stop signal on any rank stops every rank after this step: they agree on it here.
    const int stop = last ? 0 : static_cast<int>(parallel::max_over(groups_.everyone(), StopOnSignal::received()));
    if (stop != 0) {
      stop_signal_ = stop;
      {
        const trace::Scope phase = trace::enabled() ? trace::Scope("checkpoint", "checkpoint save") : trace::Scope();
        save_checkpoint();
      }
      if (is_main_rank()) {
        std::fflush(stdout);
        std::fprintf(stderr, "meshflow: received %s at step %lld: saved checkpoint %s, exiting\n",
                     signal_name(stop).c_str(), static_cast<long long>(iter_),
                     (fs::path(opts_.output_dir) / "checkpoints" / io::checkpoint_name(iter_)).string().c_str());
        std::fflush(stderr);
      }
      break;
    }
    if (opts_.eval_enabled && ((opts_.eval_period > 0 && iter_ % opts_.eval_period == 0) || last)) {
      EvalStats e;
      {
        const trace::Scope phase = trace::enabled() ? trace::Scope("eval", "evaluation") : trace::Scope();
        e = evaluate();
      }
      run_hooks([&](HookBase& h) { h.after_eval(*this, e); });
    }
    if ((opts_.checkpoint_period > 0 && iter_ % opts_.checkpoint_period == 0) || last) {
      const trace::Scope phase = trace::enabled() ? trace::Scope("checkpoint", "checkpoint save") : trace::Scope();
      save_checkpoint();
    }
    if (exiting) break;
  }
  run_hooks([&](HookBase& h) { h.after_train(*this); });
  watchdog_.reset();  // this rank finished: peers stop watching it
}

void Trainer::save_checkpoint() {
  // Every rank writes its own pieces, in parallel; nothing is gathered (io/checkpoint.h).
  std::vector<io::ShardPiece> mine;
  for (const StateSlot& s : state_slots(*model_, *sync_, *optimizer_))
    if (s.writer) mine.push_back({s.name, s.local, s.logical, s.region});
  io::TrainingState st;
  st.iter = iter_;
  st.optimizer_steps = optimizer_->step_count();
  st.data_position = train_data_->position();
  st.rng = default_generator().state();
  if (scaler_.enabled()) st.loss_scaler = scaler_.state();
  st.skipped_iters = skipped_iters_;
  st.run = io::RunConstants{opts_.seq_length, global_batch_size(), opts_.seed};
  std::map<std::string, int64_t> layout = groups_.dims().named();  // {"dp": 2, "pp": 1, "tp": 2}
  layout["virtual_pp"] = model_->stage().num_chunks();
  layout["zero_stage"] = sync_->zero_stage();
  io::write_checkpoint_shards(groups_.everyone(), opts_.output_dir, st, opts_.config_yaml, layout, mine, opts_.max_to_keep);
}

void Trainer::check_run_continues(const std::string& dir, const io::TrainingState& st) const {
  if (!st.run) return;  // a tool's checkpoint, or an earlier version's: nothing recorded
  const io::RunConstants& was = *st.run;
  auto refuse = [&](const std::string& key, const std::string& now, const std::string& then) {
    MF_THROW("train.resume: ", key, " ", now, " differs from ", then, " in checkpoint ", dir,
             ": a resumed run continues the data of the run it resumes; set ", key, "=", then,
             ", or start a new run in another train.output_dir");
  };
  if (opts_.seq_length != was.seq_length)
    refuse("data.seq_length", std::to_string(opts_.seq_length), std::to_string(was.seq_length));
  if (global_batch_size() != was.global_batch_size)
    refuse("train.global_batch_size",
           detail::cat(global_batch_size(), " (train_micro_batch_size ", opts_.micro_batch, " x num_accumulation_steps ",
                       opts_.accumulation_steps, " x data_parallel_size ", dp_size(), ")"),
           std::to_string(was.global_batch_size));
  if (opts_.seed != was.seed) refuse("train.seed", std::to_string(opts_.seed), std::to_string(was.seed));
}

bool Trainer::load_latest_checkpoint() {
  std::optional<io::CheckpointReader> reader;
  try {
    if (auto found = io::CheckpointReader::open_latest(opts_.output_dir)) reader.emplace(std::move(*found));
    if (reader) reader->verify(groups_.everyone());
  } catch (const Error& e) {
    // A damaged newest checkpoint: name the complete one before it, which a resume can use.
    const std::vector<std::string> complete = io::complete_checkpoints(opts_.output_dir);
    std::string bad = reader ? fs::path(reader->dir()).filename().string() : std::string();
    const fs::path latest = fs::path(opts_.output_dir) / "checkpoints" / "latest";
    if (bad.empty() && fs::exists(latest)) {  // the metadata of the checkpoint `latest` names failed (or is gone)
      bad = read_file(latest.string());
      while (!bad.empty() && (bad.back() == '\n' || bad.back() == ' ')) bad.pop_back();
      if (!io::is_checkpoint_name(bad) || !fs::is_directory(fs::path(opts_.output_dir) / "checkpoints" / bad)) bad.clear();
    }
    std::string previous;
    for (const std::string& n : complete)
      if (!bad.empty() && n != bad && std::stoll(n.substr(5)) < std::stoll(bad.substr(5))) {
        previous = n;
        break;
      }
    if (previous.empty()) throw;
    throw Error(std::string(e.what()) + "; the previous complete checkpoint is " + previous +
                ": to resume from it, write its name into " + latest.string());
  }
  if (!reader) {
    manual_seed(opts_.seed);
    return false;
  }
  if (!reader->note().empty() && is_main_rank())
    std::fprintf(stderr, "meshflow: warning: resuming from %s (%s)\n", reader->dir().c_str(), reader->note().c_str());
  // A checkpoint of another model (fewer layers: its tensors are a subset of this model's names
  // only where they match) is refused, not read in part: every parameter it holds is this model's.
  std::set<std::string> params;
  for (const auto& [name, shape] : model_->parameter_shapes()) params.insert("model/" + name);
  for (const std::string& name : reader->names())
    MF_CHECK(name.rfind("model/", 0) != 0 || params.count(name) != 0, "checkpoint ", reader->dir(), ": tensor '",
             name.substr(6), "' is not a parameter of this model (", model_->describe(),
             "): train.resume continues the run the checkpoint's config.yaml describes; its model.* keys must not "
             "change");
  check_run_continues(reader->dir(), reader->state());
  MF_CHECK(reader->state().iter <= opts_.train_iter, "train.resume: checkpoint ", reader->dir(), " is at iteration ",
           reader->state().iter, ", past train.train_iter=", opts_.train_iter,
           ": raise train.train_iter to train on from it");
  // Each rank reads the regions it holds, whatever layout wrote them.
  NoGradGuard ng;
  for (StateSlot& s : state_slots(*model_, *sync_, *optimizer_)) {
    MF_CHECK(reader->has(s.name), "checkpoint ", reader->dir(), ": no tensor '", s.name, "' (this model and the ",
             optimizer_->name(), " optimizer need it)");
    MF_CHECK(reader->shape(s.name) == s.logical, "checkpoint ", reader->dir(), ": tensor '", s.name, "' is ",
             shape_str(reader->shape(s.name)), ", this model's is ", shape_str(s.logical));
    reader->read(s.name, s.region, s.local);
  }
  const io::TrainingState& st = reader->state();
  optimizer_->set_step_count(st.optimizer_steps);
  iter_ = st.iter;
  train_data_->set_position(st.data_position);
  default_generator().set_state(st.rng);
  if (st.loss_scaler) scaler_.set_state(*st.loss_scaler);
  skipped_iters_ = st.skipped_iters;
  return true;
}

}  // namespace mf::train
