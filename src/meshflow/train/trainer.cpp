#include "meshflow/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/dist/boxing.h"
#include "meshflow/dist/grad_reducer.h"
#include "meshflow/dist/zero_shards.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/tensor/allocator.h"
#include "meshflow/tensor/storage.h"
#include "meshflow/train/checkpoint.h"
#include "meshflow/train/components.h"
#include "meshflow/train/peak_flops.h"
#include "meshflow/train/pipeline_schedule.h"
#include "meshflow/dist/sbp.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace mf::train {

namespace fs = std::filesystem;

namespace {
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const models::Model& m) {
  return optimizer_registry().create(o.optim, optim::default_param_groups(m, o.weight_decay), o);
}

LossScalerOptions scaler_options(const TrainOptions& o, const models::Model& m) {
  LossScalerOptions s = o.loss_scaler;
  s.enabled = m.param_dtype() == DType::kF16;  // bf16 has f32's range: no scaling
  return s;
}

// The sum of the gradients' squares, as a double, on a GPU: each gradient's sum widened to f64 and
// added there in order (as the host path adds their item()s), then read once — one
// synchronisation instead of one per parameter.
double sum_of_squares_on_device(const std::vector<Tensor>& grads) {
  Tensor acc;
  for (const Tensor& g : grads) {
    Tensor s = cast(sum_squares(g), DType::kF64);
    acc = acc.defined() ? add(acc, s) : s;
  }
  return acc.defined() ? acc.item() : 0.0;
}

optim::SchedulerConfig scheduler_config(const TrainOptions& o) {
  optim::SchedulerConfig c = o.scheduler;
  c.base_lr = o.lr;
  c.total_iters = o.train_iter;
  return c;
}
}  // namespace

Trainer::Trainer(TrainOptions opts, std::shared_ptr<models::Model> model, std::unique_ptr<BatchSource> train_data,
                 std::function<std::unique_ptr<BatchSource>()> make_valid_data)
    : opts_(std::move(opts)),
      model_(std::move(model)),
      train_data_(std::move(train_data)),
      make_valid_data_(std::move(make_valid_data)),
      optimizer_(make_optimizer(opts_, *model_)),
      scheduler_(scheduler_registry().create(opts_.scheduler.name, scheduler_config(opts_))),
      scaler_(scaler_options(opts_, *model_)) {
  const std::vector<Tensor> params = model_->parameters();
  device_ = params.empty() ? cpu_device() : params[0].device();
  for (const Tensor& p : params)
    MF_CHECK(p.device() == device_, "trainer: the model's parameters are on ", device_.str(), " and ", p.device().str(),
             "; move the whole model (Module::to_device) before training");
  MF_CHECK(opts_.train_iter > 0 && opts_.micro_batch > 0 && opts_.accumulation_steps > 0, "trainer: train.train_iter (",
           opts_.train_iter, "), train.train_micro_batch_size (", opts_.micro_batch,
           ") and train.num_accumulation_steps (", opts_.accumulation_steps, ") must be positive");
}

Trainer::~Trainer() = default;

void Trainer::set_parallel(std::shared_ptr<comm::Communicator> dp, std::shared_ptr<comm::Communicator> all,
                           std::shared_ptr<comm::Communicator> pp, std::shared_ptr<comm::Communicator> world) {
  MF_CHECK(iter_ == 0 && !reducer_ && !replicated_reducer_ && !all_ && !pp_,
           "trainer: set_parallel must be called once, before train()");
  const nn::TensorParallel& tp = model_->tensor_parallel();
  for (auto* c : {dp.get(), all.get(), pp.get(), world.get()})
    if (c) c->set_timeout_seconds(opts_.dist_timeout_seconds);
  if (tp.comm) tp.comm->set_timeout_seconds(opts_.dist_timeout_seconds);
  if (all && all->size() > 1) all_ = std::move(all);
  if (dp && dp->size() > 1) dp_ = std::move(dp);
  if (pp && pp->size() > 1) {
    pp_ = std::move(pp);
    world_ = std::move(world);
    MF_CHECK(world_ != nullptr, "trainer: pipeline parallelism needs the world group");
    // The tied embedding lives on the first and the last stage: their gradients are summed.
    embed_ = pp_->sub_group({0, pp_->size() - 1});
  }
  std::vector<Tensor> params = model_->parameters();
  std::vector<nn::ParamLayout> layouts = model_->parameter_layouts();
  split_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) split_[i] = tp.enabled() && !layouts[i].replicated();
  MF_CHECK(!tp.enabled() || (all_ != nullptr && all_->size() == dp_size() * tp.size()),
           "trainer: the group of all ranks (", all_ ? all_->size() : 1,
           ") must be data_parallel_size x tensor_parallel_size = ", dp_size() * tp.size());
  if (opts_.zero_stage >= 1 && dp_) set_zero(params);
  if (zero_shards_) return;  // ZeRO 2 and 3 reduce the gradients themselves
  if (!tp.enabled()) {
    if (dp_) reducer_ = std::make_unique<dist::GradReducer>(params, dp_, opts_.grad_bucket_bytes);
    return;
  }
  // Split parameters: exact local gradients, averaged over dp. Replicated ones: partial sums
  // over tp (each tp rank saw loss / tp), so summed over dp x tp and divided by dp.
  std::vector<Tensor> split, replicated;
  for (size_t i = 0; i < params.size(); ++i) (split_[i] ? split : replicated).push_back(params[i]);
  const double mean = 1.0 / static_cast<double>(dp_size());
  if (dp_ && !split.empty()) reducer_ = std::make_unique<dist::GradReducer>(split, dp_, opts_.grad_bucket_bytes, mean);
  if (!replicated.empty())
    replicated_reducer_ = std::make_unique<dist::GradReducer>(replicated, all_, opts_.grad_bucket_bytes, mean);
}

void Trainer::set_zero(const std::vector<Tensor>& params) {
  // The optimizer sees this rank's flat slice of every parameter, under the parameter's name.
  NoGradGuard ng;
  const nn::TensorParallel& tp = model_->tensor_parallel();
  const int n = dp_->size(), r = dp_->rank();
  if (opts_.zero_stage >= 2) {
    dist::ZeroShards::Options o;
    o.stage = static_cast<int>(opts_.zero_stage);
    o.dp = dp_;
    o.tp = tp.enabled() ? tp.comm : nullptr;
    o.grad_scale = 1.0 / static_cast<double>(n);  // the mean over dp (replicated ones: then summed over tp)
    std::vector<bool> replicated(params.size());
    for (size_t k = 0; k < params.size(); ++k) replicated[k] = tp.enabled() && !split_[k];
    zero_shards_ = std::make_unique<dist::ZeroShards>(params, replicated, model_->parameter_units(), o);
    if (opts_.zero_stage == 3) model_->set_param_use_hooks(zero_shards_.get());
  }
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t k = 0; k < params.size(); ++k) index[params[k].impl()] = k;
  std::vector<optim::ParamGroup> groups = optim::default_param_groups(*model_, opts_.weight_decay);
  for (auto& g : groups)
    for (auto& [name, p] : g.params) {
      const int64_t numel = p.numel();
      MF_CHECK(numel >= n, "ZeRO: parameter '", name, "' has ", numel, " elements, fewer than the ", n,
               " data-parallel ranks it is sharded over");
      const size_t k = index.at(p.impl());
      ZeroShard z{p, Tensor(), dist::split_start(numel, n, r), dist::split_size(numel, n, r), k};
      z.shard = zero_shards_ ? zero_shards_->shard(k) : narrow(reshape(p, {numel}), 0, z.start, z.numel);
      zero_.push_back(z);
      p = z.shard;
    }
  optimizer_ = optimizer_registry().create(opts_.optim, std::move(groups), opts_);
}

uint64_t Trainer::comm_bytes() const {
  // Every group this rank communicates on, each once: gradients (dp, dp x tp), the layers' tp
  // collectives, pipeline sends, the tied embedding's stages, the run-wide checks.
  const comm::Communicator* groups[] = {dp_.get(),   all_.get(),   model_->tensor_parallel().comm.get(),
                                        pp_.get(),   embed_.get(), world_.get()};
  uint64_t n = 0;
  for (size_t i = 0; i < std::size(groups); ++i)
    if (groups[i] && std::find(groups, groups + i, groups[i]) == groups + i) n += groups[i]->stats().total_bytes();
  return n;
}

double Trainer::clip_gradients(double grad_scale) {
  const nn::TensorParallel& tp = model_->tensor_parallel();
  const double norm_type = opts_.clip_grad_norm_type;
  if (!zero_shards_ && !tp.enabled() && !pp_ && device_.type == DeviceType::kCPU)
    return optim::clip_grad_norm(model_->parameters(), opts_.clip_grad_max_norm, grad_scale, norm_type);
  optim::check_clip_norm_type(norm_type, "optim.clip_grad_norm_type");
  const bool inf_norm = norm_type != 2.0;
  // The logical norm. L2: split pieces' squares summed over tp, replicated ones counted once, the
  // stages' sums added (the last stage's copy of the tied embedding left out). Under ZeRO 2/3
  // each rank holds its dp slice of every gradient: both sums are then also summed over dp.
  // Infinity: the largest |element| of the same gradients, the max over tp, pp and dp instead.
  NoGradGuard ng;
  // The last stage's copies of tied parameters are counted on the first stage.
  std::vector<const TensorImpl*> tied_copy;
  if (pp_ && pp_->rank() == pp_->size() - 1)
    for (const Tensor& t : tied_copies()) tied_copy.push_back(t.impl());
  std::vector<Tensor> grads;  // what is clipped
  std::vector<Tensor> counted;  // infinity norm: what the max runs over
  Tensor ss = zeros({2}, DType::kF64);  // split, replicated (host)
  std::vector<Tensor> on_device[2];     // a GPU run's gradients of each kind, summed there
  auto add = [&](const Tensor& param, const Tensor& g, size_t index) {
    if (!g.defined()) return;
    grads.push_back(g);
    if (std::find(tied_copy.begin(), tied_copy.end(), param.impl()) != tied_copy.end()) return;
    if (inf_norm) {
      counted.push_back(g);
      return;
    }
    const int kind = !split_.empty() && split_[index] ? 0 : 1;  // one process: every parameter replicated
    if (device_.type == DeviceType::kCPU)
      ss.data<double>()[kind] += sum_squares(g).item();
    else
      on_device[kind].push_back(g);
  };
  if (zero_shards_) {
    for (const ZeroShard& z : zero_) add(z.param, z.shard.grad(), z.index);
  } else {
    const std::vector<Tensor> params = model_->parameters();
    for (size_t i = 0; i < params.size(); ++i) add(params[i], params[i].grad(), i);
  }
  double norm = 0;
  if (inf_norm) {
    // Copies held alike (over dp, tp-replicated, the tied embedding's stages) are equal, so one
    // max over every rank of the run is the logical one. NaN goes as a flag: MPI's max may drop it.
    const double local = optim::max_abs(counted);
    Tensor m = zeros({2}, DType::kF64);
    m.data<double>()[0] = std::isnan(local) ? 0.0 : local;
    m.data<double>()[1] = std::isnan(local) ? 1.0 : 0.0;
    if (comm::Communicator* c = everyone()) c->all_reduce(m, comm::ReduceOp::kMax)->wait();
    norm = m.data<double>()[1] > 0 ? std::nan("") : m.data<double>()[0] / grad_scale;
  } else {
    if (device_.type != DeviceType::kCPU)
      for (int kind = 0; kind < 2; ++kind) ss.data<double>()[kind] = sum_of_squares_on_device(on_device[kind]);
    if (zero_shards_) dp_->all_reduce(ss)->wait();
    double split_ss = ss.data<double>()[0];
    if (tp.enabled()) {
      Tensor t = full({1}, split_ss, DType::kF64);
      tp.comm->all_reduce(t)->wait();
      split_ss = t.data<double>()[0];
    }
    norm = std::sqrt(sum_over_pp(split_ss + ss.data<double>()[1])) / grad_scale;
  }
  const double max_norm = opts_.clip_grad_max_norm;
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    for (Tensor& g : grads) scale_(g, max_norm / (norm + 1e-6));
  return norm;
}

Tensor Trainer::stage_activation(int64_t rows, int64_t seq_len) const {
  return empty(model_->activation_shape(rows, seq_len), model_->activation_dtype(device_), device_);
}

double Trainer::mean_over_dp(double local) {
  if (!dp_) return local;
  Tensor t = full({1}, local, DType::kF64);
  dp_->all_reduce(t)->wait();
  return t.data<double>()[0] / static_cast<double>(dp_->size());
}

void Trainer::barrier() {
  if (world_)
    world_->barrier()->wait();
  else if (all_)
    all_->barrier()->wait();
}

void Trainer::zero_step() {
  NoGradGuard ng;
  if (!zero_shards_)  // ZeRO-1: the slices of the reduced gradients (ZeRO 2, 3: already sliced)
    for (ZeroShard& z : zero_) {
      Tensor g = z.param.grad();
      z.shard.set_grad(g.defined() ? narrow(reshape(contiguous(g), {z.param.numel()}), 0, z.start, z.numel) : Tensor());
    }
  optimizer_->step();
  for (ZeroShard& z : zero_) z.shard.zero_grad();
  if (opts_.zero_stage >= 3) return;  // the slices are the parameters
  for (ZeroShard& z : zero_) {  // every rank's updated slice to everyone: S(0) -> B
    Tensor whole = dist::box_axis(contiguous(z.shard), dist::Sbp::split(0), dist::Sbp::broadcast(), {z.param.numel()}, *dp_);
    Tensor flat = reshape(z.param, {z.param.numel()});
    copy_(flat, whole);
  }
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
  const std::vector<Tensor> params = model_->parameters();
  for (const Tensor& p : params) count(p, m.parameters);
  for (const ZeroShard& z : zero_) count(z.shard, m.parameters);
  for (const Tensor& p : params) count(p.grad(), m.gradients);
  if (zero_shards_)
    m.gradients += zero_shards_->grad_segment_bytes();  // ZeRO 2, 3: the reduced slices' buffers
  else
    for (const ZeroShard& z : zero_) count(z.shard.grad(), m.gradients);
  for (const auto& [name, t] : optimizer_->state_tensors()) count(t, m.optimizer_state);
  if (zero_shards_) m.comm_buffers = zero_shards_->buffer_peak_bytes();
  m.peak = peak;
  m.activations = std::max<int64_t>(0, peak - m.parameters - m.gradients - m.optimizer_state);
  return m;
}

bool Trainer::any_rank(bool local) {
  comm::Communicator* c = world_ ? world_.get() : all_ ? all_.get() : dp_.get();
  if (!c) return local;
  Tensor t = full({1}, local ? 1.0 : 0.0, DType::kF64);
  c->all_reduce(t, comm::ReduceOp::kMax)->wait();
  return t.data<double>()[0] > 0;
}

double Trainer::sum_over_pp(double local) {
  if (!pp_) return local;
  Tensor t = full({1}, local, DType::kF64);
  pp_->all_reduce(t)->wait();
  return t.data<double>()[0];
}

double Trainer::pipeline_step() {
  // Without pipeline parallelism this is one stage running 1F1B: forward and backward of each
  // micro-batch in turn, holding one micro-batch's activations.
  const int64_t m = opts_.accumulation_steps, p = pp_size(), stage = pp_ ? pp_->rank() : 0, mb = opts_.micro_batch;
  const int64_t v = model_->stage().num_chunks();
  const int64_t T = opts_.seq_length;
  const PipelineSchedule schedule = pp_ ? parse_pipeline_schedule(opts_.pipeline_schedule) : PipelineSchedule::k1F1B;
  const std::vector<PipelineAction> actions = pipeline_actions(schedule, p, stage, m, v);
  pipe_stats_ = PipelineStats{};
  pipe_stats_.max_in_flight = max_in_flight(actions);
  const auto t_start = std::chrono::steady_clock::now();
  auto& alloc = allocator_for(device_);
  const std::vector<Tensor> params = model_->parameters();
  auto activation_bytes = [&, base = alloc.stats().current_bytes] {
    int64_t grads = 0;
    for (const Tensor& t : params)
      if (t.grad().defined()) grads += static_cast<int64_t>(t.grad().nbytes());
    return alloc.stats().current_bytes - base - grads;
  };
  auto timed_wait = [&](const comm::WorkPtr& w) {
    const auto t0 = std::chrono::steady_clock::now();
    w->wait();
    pipe_stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Virtual stage j = chunk * p + stage; its neighbours are j - 1 and j + 1 (rank and chunk).
  // A message's tag names the receiving chunk, the micro-batch and the direction.
  const int64_t vstages = p * v;
  auto rank_of = [&](int64_t j) { return static_cast<int>(j % p); };
  auto tag = [&](int64_t micro, int64_t chunk, int kind) { return static_cast<int>((2 * (micro * v + chunk) + kind) % 32768); };
  // Every stage reads the step's micro-batches (the first uses the ids, the last the labels), so
  // the sampler position stays the same everywhere.
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int64_t i = 0; i < m; ++i) {
    auto [ids, labels] = train_data_->next(mb);
    batches.emplace_back(ids, labels);  // host tensors: the embedding checks the ids and uploads them
                                       // asynchronously, the loss head reads the labels on the host
  }
  Generator& gen = default_generator();
  const uint64_t s0 = gen.state().next_stream, spf = model_->streams_per_forward();
  // fp16: the seed carries the loss scale (every gradient comes out scale x the true one).
  const double backward_scale = scaler_.scale() / static_cast<double>(m * tp_size());
  struct InFlight {
    Tensor input, output;  // output: the loss on the last virtual stage
  };
  std::vector<InFlight> held(static_cast<size_t>(m * v));
  std::vector<comm::WorkPtr> sends;
  double loss_sum = 0;
  Tensor loss_on_device;  // a GPU run's micro-batch losses, summed there in f64 and read once at the end
  for (size_t n = 0; n < actions.size(); ++n) {
    const PipelineAction& a = actions[n];
    const int64_t j = a.chunk * p + stage;
    const bool first = j == 0, last = j == vstages - 1;
    InFlight& f = held[static_cast<size_t>(a.micro * v + a.chunk)];
    // This rank's rows [r * mb, (r + 1) * mb) of the global micro-batch: dropout draws theirs.
    std::optional<BatchSliceGuard> slice;
    if (dp_) slice.emplace(dp_rank() * mb, dp_size() * mb);
    if (a.forward) {
      if (first) {
        f.input = batches[static_cast<size_t>(a.micro)].first;
      } else {
        f.input = stage_activation(mb, T);
        timed_wait(pp_->recv(f.input, rank_of(j - 1), tag(a.micro, a.chunk, 0)));
        f.input.set_requires_grad(true);
      }
      Tensor out = model_->stage_forward(f.input, s0 + static_cast<uint64_t>(a.micro) * spf, T, a.chunk);
      if (last) {
        f.output = model_->head_loss(out, batches[static_cast<size_t>(a.micro)].second);
        if (device_.type == DeviceType::kCPU) {
          loss_sum += f.output.item();
        } else {  // no synchronisation per micro-batch: the host keeps queueing work
          Tensor l = cast(f.output.detach(), DType::kF64);
          loss_on_device = loss_on_device.defined() ? add(loss_on_device, l) : l;
        }
      } else {
        f.output = out;
        sends.push_back(pp_->send(contiguous(out.detach()), rank_of(j + 1), tag(a.micro, (j + 1) / p, 0)));
      }
      const int64_t held_bytes = activation_bytes();
      if (pipe_stats_.micro_activation_bytes == 0) pipe_stats_.micro_activation_bytes = held_bytes;
      pipe_stats_.peak_activation_bytes = std::max(pipe_stats_.peak_activation_bytes, held_bytes);
    } else {
      // The stage's last backward makes its gradients final (interleaved: chunks other than 0
      // finished earlier; their buckets are reduced in finish()).
      if (n + 1 == actions.size()) {
        for (auto* r : {reducer_.get(), replicated_reducer_.get()})
          if (r) r->prepare();
        if (zero_shards_) zero_shards_->prepare();
      }
      if (last) {
        scale(f.output, backward_scale).backward();
      } else {
        Tensor g = stage_activation(mb, T);
        timed_wait(pp_->recv(g, rank_of(j + 1), tag(a.micro, a.chunk, 1)));
        f.output.backward(g);
      }
      if (!first) sends.push_back(pp_->send(contiguous(f.input.grad()), rank_of(j - 1), tag(a.micro, (j - 1) / p, 1)));
      f = InFlight{};
    }
  }
  for (auto& w : sends) timed_wait(w);
  gen.set_state({gen.seed(), s0 + static_cast<uint64_t>(m) * spf});
  if (loss_on_device.defined()) loss_sum = loss_on_device.item();
  pipe_stats_.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return loss_sum;
}

double Trainer::device_peak_flops() const {
#if MESHFLOW_WITH_CUDA
  // The chip's dense peak for the arithmetic the model runs: tensor cores for bf16/f16 models.
  if (device_.type == DeviceType::kCUDA) return cuda::peak_flops(device_.index, model_->param_dtype());
#endif
  return measured_peak_flops();
}

void Trainer::run_hooks(const std::function<void(HookBase&)>& f) {
  for (auto& h : hooks_) f(*h);
}

StepStats Trainer::train_step() {
  auto t0 = std::chrono::steady_clock::now();
  allocator_for(device_).reset_peak();
  if (zero_shards_) zero_shards_->reset_buffer_peak();
  model_->train();
  for (Tensor& p : model_->parameters()) p.zero_grad();  // the model's own (ZeRO's optimizer holds slices)
  // The schedule follows the updates made (equal to iter_ unless fp16 skipped some: Megatron's rule).
  double lr = scheduler_.lr_at(optimizer_->step_count());
  optimizer_->set_lr(lr);
  double loss_sum = 0.0;
  const uint64_t comm_bytes0 = comm_bytes();
  loss_sum = pipeline_step();
  double exposed = 0;
  for (auto* r : {reducer_.get(), replicated_reducer_.get()})
    if (r) {
      r->finish();
      exposed += r->last_timeline().exposed_s();
    }
  if (zero_shards_) {
    zero_shards_->finish();
    exposed += zero_shards_->last_exposed_s();
    for (ZeroShard& z : zero_) z.shard.set_grad(zero_shards_->shard_grad(z.index));
  }
  if (embed_) {  // the tied embedding's sum over the first and last stage: after backward, all exposed
    const auto t_embed = std::chrono::steady_clock::now();
    sum_tied_gradients();
    exposed += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_embed).count();
  }
  loss_sum = mean_over_dp(sum_over_pp(loss_sum));
  // Mixed precision: gradients with an inf or NaN on any rank skip the update (parameters,
  // optimizer state and its step count unchanged; the iteration and the data advance), as
  // Megatron-LM does for fp16; bf16 skips such a step too rather than poison the weights.
  const double loss_scale = scaler_.scale();
  double grad_norm = clip_gradients(loss_scale);
  const bool skip = mixed_precision() && any_rank(!std::isfinite(grad_norm));
  if (!skip) {
    optimizer_->set_grad_scale(1.0 / loss_scale);
    if (zero_.empty())
      optimizer_->step();
    else
      zero_step();
  } else {
    ++skipped_iters_;
  }
  scaler_.update(skip);
  ++iter_;
  StepStats s;
  s.iter = iter_;
  s.loss = loss_sum / static_cast<double>(opts_.accumulation_steps);
  s.lr = lr;
  s.grad_norm = grad_norm;
  s.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.tokens_per_sec = static_cast<double>(tokens_per_step()) / s.step_seconds;
  s.mfu = peak_flops_ > 0 ? s.tokens_per_sec * model_->flops_per_token(opts_.seq_length) / peak_flops_ : 0.0;
  s.peak_bytes = allocator_for(device_).stats().peak_bytes;
  s.memory = memory_report(s.peak_bytes);
  s.comm_bytes_est = static_cast<int64_t>(comm_bytes() - comm_bytes0);
  s.exposed_comm_s = exposed;
  s.loss_scale = loss_scale;
  s.skipped = skip;
  s.skipped_iters = skipped_iters_;
  return s;
}

EvalStats Trainer::evaluate() {
  NoGradGuard ng;
  model_->eval();
  std::unique_ptr<BatchSource> data = make_valid_data_();
  double total = 0.0;
  for (int64_t i = 0; i < opts_.eval_iter; ++i) {
    auto [host_ids, host_labels] = data->next(opts_.eval_micro_batch);
    const Tensor ids = host_ids, labels = host_labels;  // host tensors, as in training
    if (!pp_) {
      total += model_->loss(ids, labels).item();
      continue;
    }
    // Forward through the (virtual) stages in turn; the last one's loss is summed over pp below.
    const int64_t p = pp_->size(), stage = pp_->rank(), v = model_->stage().num_chunks(), T = ids.shape(1);
    for (int64_t chunk = 0; chunk < v; ++chunk) {
      const int64_t j = chunk * p + stage;
      Tensor in = ids;
      if (j > 0) {
        in = stage_activation(ids.shape(0), T);
        pp_->recv(in, static_cast<int>((j - 1) % p), static_cast<int>(chunk))->wait();
      }
      Tensor out = model_->stage_forward(in, 0, T, chunk);
      if (j + 1 < p * v)
        pp_->send(contiguous(out), static_cast<int>((j + 1) % p), static_cast<int>((j + 1) / p))->wait();
      else
        total += model_->head_loss(out, labels).item();
    }
  }
  model_->train();
  EvalStats e;
  e.iter = iter_;
  e.loss = mean_over_dp(sum_over_pp(total) / static_cast<double>(std::max<int64_t>(1, opts_.eval_iter)));
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
  peak_flops_ = device_peak_flops() * static_cast<double>(dp_size() * tp_size() * pp_size());
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

namespace {
// This rank's tensor-parallel box of a parameter's logical tensor (all of it when not split).
TensorRegion tp_box(const nn::ParamLayout& l, const nn::TensorParallel& tp) {
  TensorRegion r = TensorRegion::whole(l.logical);
  if (!tp.enabled() || l.replicated()) return r;
  r.view = l.view();
  r.axis = l.split_axis;
  const int64_t n = r.view[static_cast<size_t>(r.axis)];
  r.start = dist::split_start(n, tp.size(), tp.rank());
  r.length = dist::split_size(n, tp.size(), tp.rank());
  return r;
}
}  // namespace

std::vector<Tensor> Trainer::tied_copies() const {
  std::vector<Tensor> out;
  const std::vector<std::string> names = model_->tied_parameters();
  for (const auto& [name, t] : model_->named_parameters())
    if (std::find(names.begin(), names.end(), name) != names.end()) out.push_back(t);
  return out;
}

void Trainer::sum_tied_gradients() {
  // A tied parameter's copies on the first and the last stage: the sum of their gradients (of
  // their ZeRO slices) on both.
  NoGradGuard ng;
  for (const Tensor& w : tied_copies()) {
    if (zero_shards_) {
      for (ZeroShard& z : zero_)
        if (z.param.impl() == w.impl()) {
          Tensor g = z.shard.grad();
          embed_->all_reduce(g)->wait();
        }
      continue;
    }
    Tensor g = w.grad();
    if (!g.defined()) g = zeros(w.shape(), w.dtype(), w.device());
    g = contiguous(g);
    embed_->all_reduce(g)->wait();
    Tensor(w).set_grad(g);
  }
}

comm::Communicator* Trainer::everyone() const {
  return world_ ? world_.get() : all_ ? all_.get() : dp_.get();
}

std::vector<Trainer::StateSlot> Trainer::state_slots() {
  // Parameters and optimizer entries ("<param>.<slot>"), each as the region of its logical tensor
  // this rank holds: its tp box, and under ZeRO its dp slice of that. A piece that several ranks
  // hold the same (replicated over dp, or over tp) is written by one: tp rank 0, and the dp rank
  // (parameter index mod dp). The last stage's copy of the tied embedding is the first stage's.
  const nn::TensorParallel& tp = model_->tensor_parallel();
  const int64_t dpn = dp_size(), dpr = dp_rank();
  const bool tied_copy_here = pp_ && pp_->rank() == pp_->size() - 1 && !model_->stage().first;
  const std::vector<std::string> tied = model_->tied_parameters();
  const auto named = model_->named_parameters();
  const auto layouts = model_->parameter_layouts();
  std::unordered_map<std::string, size_t> index;
  for (size_t k = 0; k < named.size(); ++k) index.emplace(named[k].first, k);
  std::vector<const ZeroShard*> shard_of(named.size(), nullptr);
  for (const ZeroShard& z : zero_) shard_of[z.index] = &z;
  auto writes = [&](size_t k, bool sliced) {
    const bool tp_writer = layouts[k].replicated() ? tp.rank() == 0 : true;
    const bool skip = tied_copy_here && std::find(tied.begin(), tied.end(), named[k].first) != tied.end();
    return tp_writer && !skip && (sliced || static_cast<int64_t>(k) % dpn == dpr);
  };
  auto slice = [&](TensorRegion r, size_t k) {
    r.flat_start = shard_of[k]->start;
    r.flat_length = shard_of[k]->numel;
    return r;
  };
  std::vector<StateSlot> slots;
  const bool sliced_params = zero_shards_ && opts_.zero_stage >= 3;
  for (size_t k = 0; k < named.size(); ++k) {
    const TensorRegion box = tp_box(layouts[k], tp);
    if (sliced_params)
      slots.push_back({"model/" + named[k].first, shard_of[k]->shard, layouts[k].logical, slice(box, k), writes(k, true)});
    else
      slots.push_back({"model/" + named[k].first, named[k].second, layouts[k].logical, box, writes(k, false)});
  }
  for (const auto& [name, t] : optimizer_->state_tensors()) {
    const size_t dot = name.rfind('.');
    auto it = dot == std::string::npos ? index.end() : index.find(name.substr(0, dot));
    MF_CHECK(it != index.end(), "checkpoint: optimizer state '", name, "' belongs to no parameter");
    const size_t k = it->second;
    const TensorRegion box = tp_box(layouts[k], tp);
    const bool sliced = shard_of[k] != nullptr;
    slots.push_back({"optimizer/" + name, t, layouts[k].logical, sliced ? slice(box, k) : box, writes(k, sliced)});
  }
  return slots;
}

void Trainer::save_checkpoint() {
  // Every rank writes its own pieces, in parallel; nothing is gathered (train/checkpoint.h).
  std::vector<ShardPiece> mine;
  for (const StateSlot& s : state_slots())
    if (s.writer) mine.push_back({s.name, s.local, s.logical, s.region});
  TrainingState st;
  st.iter = iter_;
  st.optimizer_steps = optimizer_->step_count();
  st.data_position = train_data_->position();
  st.rng = default_generator().state();
  if (scaler_.enabled()) st.loss_scaler = scaler_.state();
  st.skipped_iters = skipped_iters_;
  const std::map<std::string, int64_t> layout = {{"dp", dp_size()},
                                                 {"tp", tp_size()},
                                                 {"pp", pp_size()},
                                                 {"virtual_pp", model_->stage().num_chunks()},
                                                 {"zero_stage", zero_.empty() ? 0 : opts_.zero_stage}};
  write_checkpoint_shards(everyone(), opts_.output_dir, st, opts_.config_yaml, layout, mine, opts_.max_to_keep);
}

bool Trainer::load_latest_checkpoint() {
  auto reader = CheckpointReader::open_latest(opts_.output_dir);
  if (!reader) {
    manual_seed(opts_.seed);
    return false;
  }
  reader->verify(everyone());
  // Each rank reads the regions it holds, whatever layout wrote them.
  NoGradGuard ng;
  for (StateSlot& s : state_slots()) {
    MF_CHECK(reader->has(s.name), "checkpoint ", reader->dir(), ": no tensor '", s.name, "' (this model and the ",
             optimizer_->name(), " optimizer need it)");
    MF_CHECK(reader->shape(s.name) == s.logical, "checkpoint ", reader->dir(), ": tensor '", s.name, "' is ",
             shape_str(reader->shape(s.name)), ", this model's is ", shape_str(s.logical));
    reader->read(s.name, s.region, s.local);
  }
  const TrainingState& st = reader->state();
  optimizer_->set_step_count(st.optimizer_steps);
  iter_ = st.iter;
  train_data_->set_position(st.data_position);
  default_generator().set_state(st.rng);
  if (st.loss_scaler) scaler_.set_state(*st.loss_scaler);
  skipped_iters_ = st.skipped_iters;
  return true;
}

}  // namespace mf::train
