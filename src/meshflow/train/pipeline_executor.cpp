#include "meshflow/train/pipeline_executor.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/trace.h"
#include "meshflow/ops/ops.h"
#include "meshflow/random/batch_slice.h"
#include "meshflow/random/generator.h"
#include "meshflow/tensor/allocator.h"

namespace mf::train {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// The output of a chunk once the next stage has it: its autograd graph without its data (what
// backward from it needs), so the in-flight micro-batches do not keep their outputs (Megatron-LM's
// deallocate_output_tensor). (An empty storage on its device: it still prints and names its device.)
Tensor graph_only(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = empty({0}, t.dtype(), t.device()).impl()->storage;
  impl->shape = t.shape();
  impl->strides = t.impl()->strides;
  impl->dtype = t.dtype();
  impl->requires_grad = t.impl()->requires_grad;
  impl->grad_fn = t.impl()->grad_fn;
  impl->output_nr = t.impl()->output_nr;
  return Tensor(std::move(impl));
}

// A profiled micro-batch's span: its forward or backward on this stage, without the waits.
trace::Scope micro_span(const char* kind, int64_t micro, int64_t chunk) {
  if (!trace::enabled()) return trace::Scope();
  std::string name = std::string(kind) + ' ' + std::to_string(micro);
  if (chunk > 0) {
    name += '.';
    name += std::to_string(chunk);
  }
  return trace::Scope(kind, name, "\"micro_batch\":" + std::to_string(micro) + ",\"chunk\":" + std::to_string(chunk));
}
}  // namespace

// The state of one pass over a step's actions. Virtual stage j = chunk * p + stage; its
// neighbours are j - 1 and j + 1 (rank and chunk). A message's tag names the receiving chunk,
// the micro-batch and the direction.
struct PipelineExecutor::Run {
  PipelineExecutor& ex;
  const std::vector<Batch>& batches;
  const std::vector<double>& totals;
  int64_t p, stage, v, T, rows;
  bool training;
  uint64_t stream0, streams_per_forward;
  struct InFlight {
    Tensor input, output;  // output: the loss on the last virtual stage
  };
  std::vector<InFlight> held;
  // The sends of each action, and for each action the earlier ones its receive proves received
  // (parallel::sends_received): those are waited for (at once) and released there, so a sent
  // gradient does not outlive its receipt, nor a sent output (held for backward as its graph).
  std::vector<comm::WorkPtr> sends;
  std::vector<int64_t> sent_output;  // per action: the held entry whose output it sent, or -1
  const std::vector<std::vector<int64_t>>& received;
  size_t now = 0;  // the action running
  double loss_sum = 0;
  Tensor loss_on_device;  // a GPU run's losses, summed there in f64 and read once at the end

  int rank_of(int64_t j) const { return static_cast<int>(j % p); }
  int tag(int64_t micro, int64_t chunk, int kind) const { return static_cast<int>((2 * (micro * v + chunk) + kind) % 32768); }
  void timed_wait(const comm::WorkPtr& w) {
    const trace::Scope span = trace::enabled() ? trace::Scope("pipeline_wait", "wait") : trace::Scope();
    const auto t0 = std::chrono::steady_clock::now();
    w->wait();
    ex.stats_.wait_seconds += seconds_since(t0);
  }

  void release_received() {
    if (now >= received.size()) return;
    for (int64_t i : received[now]) {
      comm::WorkPtr& w = sends[static_cast<size_t>(i)];
      if (!w) continue;
      timed_wait(w);
      w.reset();
      const int64_t h = sent_output[static_cast<size_t>(i)];
      if (h >= 0 && held[static_cast<size_t>(h)].output.defined())
        held[static_cast<size_t>(h)].output = graph_only(held[static_cast<size_t>(h)].output);
    }
  }
  void send(const Tensor& t, int64_t to_virtual_stage, int64_t micro, int kind, int64_t output_of = -1) {
    sends[now] = ex.g_.get("pp")->send(contiguous(t), rank_of(to_virtual_stage), tag(micro, to_virtual_stage / p, kind));
    sent_output[now] = output_of;
  }

  void forward(int64_t micro, int64_t chunk) {
    const int64_t j = chunk * p + stage;
    InFlight& f = held[static_cast<size_t>(micro * v + chunk)];
    const Batch& batch = batches[static_cast<size_t>(micro)];  // host ids: the embedding checks and uploads them
    if (j > 0) {
      f.input = ex.stage_buffer(rows, T);
      timed_wait(ex.g_.get("pp")->recv(f.input, rank_of(j - 1), tag(micro, chunk, 0)));
      release_received();
      if (training) f.input.set_requires_grad(true);
    }
    const trace::Scope span = micro_span(training ? "forward" : "eval_forward", micro, chunk);
    // Training: every micro-batch of the step draws the same streams, each row at its place in the
    // step's global batch (the batch slice below), so the draws do not depend on how the global
    // batch is split over ranks and micro-batches. Evaluation draws nothing.
    Tensor out = ex.model_->stage_forward(batch, f.input, stream0, T, chunk);
    if (j + 1 < p * v) {
      f.output = out;
      send(out.detach(), j + 1, micro, 0, training ? micro * v + chunk : -1);
      return;
    }
    // Evaluation: the metrics while the head's parameters are in use (ZeRO-3 releases them after
    // head_loss).
    if (!training) ex.last_metrics_ = ex.model_->head_metrics(out, batch);
    f.output = ex.model_->head_loss(out, batch, totals);
    if (ex.device_.type == DeviceType::kCPU) {
      loss_sum += f.output.item();
    } else {  // no synchronisation per micro-batch: the host keeps queueing work
      Tensor l = cast(f.output.detach(), DType::kF64);
      loss_on_device = loss_on_device.defined() ? add(loss_on_device, l) : l;
    }
  }

  void backward(int64_t micro, int64_t chunk, double backward_scale) {
    const int64_t j = chunk * p + stage;
    InFlight& f = held[static_cast<size_t>(micro * v + chunk)];
    if (j + 1 == p * v) {
      const trace::Scope span = micro_span("backward", micro, chunk);
      scale(f.output, backward_scale).backward();
    } else {
      Tensor g = ex.stage_buffer(rows, T);
      timed_wait(ex.g_.get("pp")->recv(g, rank_of(j + 1), tag(micro, chunk, 1)));
      release_received();
      const trace::Scope span = micro_span("backward", micro, chunk);
      f.output.backward(g);
    }
    if (j > 0) send(f.input.grad(), j - 1, micro, 1);
    f = InFlight{};
  }
};

PipelineExecutor::PipelineExecutor(models::Model& model, const parallel::NamedGroups& groups, Device device)
    : model_(&model), g_(groups), device_(device) {}

Tensor PipelineExecutor::stage_buffer(int64_t rows, int64_t seq_len) const {
  return empty(model_->activation_shape(rows, seq_len), model_->activation_dtype(device_), device_);
}

double PipelineExecutor::run(const std::vector<parallel::PipelineAction>& actions,
                             const std::vector<std::vector<int64_t>>& received, const std::vector<Batch>& batches,
                             const std::vector<double>& loss_totals, int64_t seq_len, bool training,
                             double backward_scale, const std::function<void()>& before_last_backward) {
  Generator& gen = default_generator();
  const int64_t v = model_->stage().num_chunks(), rows = batches.front().rows();
  Run r{*this, batches, loss_totals, g_.size("pp"), g_.rank("pp"), v, seq_len, rows, training, gen.state().next_stream,
        model_->streams_per_forward(), {}, std::vector<comm::WorkPtr>(actions.size()),
        std::vector<int64_t>(actions.size(), -1), received, 0, 0, {}};
  r.held.resize(batches.size() * static_cast<size_t>(v));
  auto& alloc = allocator_for(device_);
  const std::vector<Tensor> params = model_->parameters();
  auto activation_bytes = [&, base = alloc.stats().current_bytes] {
    int64_t grads = 0;
    for (const Tensor& t : params)
      if (t.grad().defined()) grads += static_cast<int64_t>(t.grad().nbytes());
    return alloc.stats().current_bytes - base - grads;
  };
  for (size_t n = 0; n < actions.size(); ++n) {
    const parallel::PipelineAction& a = actions[n];
    r.now = n;
    // This rank's rows of micro-batch m are rows [(m * dp + r) * rows, +rows) of the step's global
    // batch — the sampler's order (data/sampler.h) — and dropout draws theirs: a sample draws the
    // same numbers whatever the data-parallel size, accumulation steps and micro-batch size that
    // make up the global batch (a restart on fewer ranks continues the run exactly).
    std::optional<BatchSliceGuard> slice;
    if (training)
      slice.emplace((a.micro * g_.size("dp") + g_.rank("dp")) * rows, static_cast<int64_t>(batches.size()) * g_.size("dp") * rows);
    if (a.forward) {
      r.forward(a.micro, a.chunk);
      if (!training) continue;
      const int64_t held_bytes = activation_bytes();
      if (stats_.micro_activation_bytes == 0) stats_.micro_activation_bytes = held_bytes;
      stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, held_bytes);
    } else {
      // The stage's last backward makes its gradients final (interleaved: chunks other than 0
      // finished earlier; their buckets are reduced after the step).
      if (n + 1 == actions.size() && before_last_backward) before_last_backward();
      r.backward(a.micro, a.chunk, backward_scale);
    }
  }
  for (auto& w : r.sends)
    if (w) r.timed_wait(w);
  if (training) gen.set_state({gen.seed(), r.stream0 + r.streams_per_forward});
  return r.loss_on_device.defined() ? r.loss_on_device.item() : r.loss_sum;
}

double PipelineExecutor::train(const std::vector<Batch>& batches, const std::vector<double>& loss_totals,
                               parallel::PipelineSchedule schedule, int64_t seq_len, double backward_scale,
                               const std::function<void()>& before_last_backward) {
  const int64_t m = static_cast<int64_t>(batches.size()), v = model_->stage().num_chunks();
  const parallel::PipelineSchedule used = g_.ptr("pp") ? schedule : parallel::PipelineSchedule::k1F1B;
  const auto actions = parallel::pipeline_actions(used, g_.size("pp"), g_.rank("pp"), m, v);
  const auto received = parallel::sends_received(used, g_.size("pp"), g_.rank("pp"), m, v);
  stats_ = PipelineStats{};
  stats_.max_in_flight = parallel::max_in_flight(actions);
  const trace::Scope span =
      trace::enabled() ? trace::Scope("schedule", std::string("pipeline ") + parallel::pipeline_schedule_name(used),
                                      "\"micro_batches\":" + std::to_string(m) + ",\"stages\":" + std::to_string(g_.size("pp")) +
                                          ",\"chunks\":" + std::to_string(v))
                       : trace::Scope();
  const auto t0 = std::chrono::steady_clock::now();
  const double loss = run(actions, received, batches, loss_totals, seq_len, true, backward_scale, before_last_backward);
  stats_.step_seconds = seconds_since(t0);
  return loss;
}

PipelineExecutor::Evaluation PipelineExecutor::evaluate(const Batch& batch) {
  NoGradGuard ng;
  std::vector<parallel::PipelineAction> forwards;  // every chunk's forward, in order
  for (int64_t chunk = 0; chunk < model_->stage().num_chunks(); ++chunk) forwards.push_back({true, 0, chunk});
  last_metrics_.assign(model_->eval_metric_names().size(), {0.0, 0.0});
  Evaluation e;
  e.loss = run(forwards, {}, {batch}, model_->loss_counts(batch), model_->sequence_length(batch), false, 1.0, nullptr);
  e.metrics = last_metrics_;
  return e;
}

}  // namespace mf::train
