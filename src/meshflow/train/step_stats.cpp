#include "meshflow/train/step_stats.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "meshflow/comm/communicator.h"
#include "meshflow/core/error.h"
#include "meshflow/tensor/storage.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace mf::train {

MemoryReport memory_report(const parallel::GradSync& sync, optim::Optimizer& optimizer, int64_t peak_bytes) {
  // Each buffer counted once, by what first names it: parameters (the model's, and ZeRO's
  // slices), then gradients, then optimizer state; released ZeRO-3 parameters count 0.
  MemoryReport m;
  std::unordered_map<const Storage*, bool> seen;
  auto count = [&](const Tensor& t, int64_t& into) {
    if (!t.defined()) return;
    const Storage* st = t.impl()->storage.get();
    if (seen.emplace(st, true).second) into += static_cast<int64_t>(st->resident_nbytes());
  };
  sync.count_memory(count, m.parameters, m.gradients);
  for (const auto& [name, t] : optimizer.state_tensors()) count(t, m.optimizer_state);
  m.comm_buffers = sync.buffer_peak_bytes();
  m.peak = peak_bytes;
  m.activations = std::max<int64_t>(0, peak_bytes - m.parameters - m.gradients - m.optimizer_state);
  return m;
}

namespace {
// One rank's figures as they travel in the all-reduce: doubles only (byte counts as doubles are
// exact below 2^53), copied in and out whole.
struct RankFigures {
  double step_seconds, exposed_comm_s, pipeline_wait_s;
  double parameters_bytes, gradients_bytes, optimizer_state_bytes, activations_bytes, comm_buffers_bytes;
  double memory_peak_bytes, peak_bytes;
  double comm_wait_s, mean_step_s, mean_comm_wait_s;
};
static_assert(std::is_standard_layout_v<RankFigures> && std::is_trivially_copyable_v<RankFigures>);
static_assert(sizeof(RankFigures) % sizeof(double) == 0, "RankFigures travels as whole doubles");
constexpr size_t kFigureDoubles = sizeof(RankFigures) / sizeof(double);

RankFigures figures_of(const StepStats& s, double pipeline_wait_s) {
  const MemoryReport& m = s.memory;
  auto d = [](int64_t bytes) { return static_cast<double>(bytes); };
  return {s.step_seconds, s.exposed_comm_s, pipeline_wait_s,
          d(m.parameters), d(m.gradients), d(m.optimizer_state), d(m.activations), d(m.comm_buffers),
          d(m.peak), d(s.peak_bytes),
          s.comm_wait_s, s.mean_step_s, s.mean_comm_wait_s};
}

RankStepStats rank_stats(int rank, const RankFigures& f, const double* coordinate, size_t dims) {
  auto bytes = [](double v) { return static_cast<int64_t>(v); };
  RankStepStats x;
  x.rank = rank;
  x.step_seconds = f.step_seconds;
  x.exposed_comm_s = f.exposed_comm_s;
  x.pipeline_wait_s = f.pipeline_wait_s;
  x.memory.parameters = bytes(f.parameters_bytes);
  x.memory.gradients = bytes(f.gradients_bytes);
  x.memory.optimizer_state = bytes(f.optimizer_state_bytes);
  x.memory.peak = bytes(f.memory_peak_bytes);
  x.memory.activations = bytes(f.activations_bytes);
  x.memory.comm_buffers = bytes(f.comm_buffers_bytes);
  x.peak_bytes = bytes(f.peak_bytes);
  x.comm_wait_s = f.comm_wait_s;
  x.mean_step_s = f.mean_step_s;
  x.mean_comm_wait_s = f.mean_comm_wait_s;
  for (size_t i = 0; i < dims; ++i) x.coordinate.push_back(static_cast<int64_t>(coordinate[i]));
  return x;
}
}  // namespace

std::vector<RankStepStats> gather_rank_stats(const StepStats& s, double pipeline_wait_s,
                                             const parallel::NamedGroups& groups) {
  comm::Communicator* everyone = groups.everyone();
  const int n = everyone ? everyone->size() : 1, me = everyone ? everyone->rank() : 0;
  // Each rank's row: its figures, then its coordinate, at its place in a vector of zeros; the sum
  // over every rank gathers the rows.
  const std::vector<int64_t> coordinate = groups.coordinate();
  const size_t row = kFigureDoubles + coordinate.size();
  std::vector<double> all(row * static_cast<size_t>(n), 0.0);
  double* mine = all.data() + row * static_cast<size_t>(me);
  const RankFigures figures = figures_of(s, pipeline_wait_s);
  std::memcpy(mine, &figures, sizeof figures);
  for (size_t i = 0; i < coordinate.size(); ++i) mine[kFigureDoubles + i] = static_cast<double>(coordinate[i]);
  all = parallel::sum_over(everyone, all);
  std::vector<RankStepStats> out;
  out.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const double* v = all.data() + row * static_cast<size_t>(r);
    RankFigures f;
    std::memcpy(&f, v, sizeof f);
    out.push_back(rank_stats(r, f, v + kFigureDoubles, coordinate.size()));
  }
  return out;
}

namespace {
runtime::PeakFlops device_peak_flops(Device device, [[maybe_unused]] DType param_dtype) {  // one rank's
#if MESHFLOW_WITH_CUDA
  // The chip's dense peak for the arithmetic the model runs: tensor cores for bf16/f16 models.
  if (device.type == DeviceType::kCUDA)
    return {cuda::peak_flops(device.index, param_dtype), "the GPU's dense peak from its data sheet"};
#endif
  return runtime::cpu_peak_flops();
}
}  // namespace

void StepMeter::start(Device device, DType param_dtype, int64_t ranks) {
  runtime::PeakFlops peak = device_peak_flops(device, param_dtype);
  if (ranks > 1) {
    peak.flops *= static_cast<double>(ranks);
    peak.source += detail::cat("; per rank, x ", ranks, " ranks");
  }
  peak_ = runtime::PeakTracker(std::move(peak));
  device_ = device;
  ranks_ = static_cast<double>(ranks);
}

void StepMeter::begin_step() {
  step_start_ = std::chrono::steady_clock::now();
  step_start_comm_wait_s_ = comm::comm_wait_seconds();
}

void StepMeter::end_step(StepStats& s, int64_t tokens_per_step, double flops_per_token) {
  s.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
  s.comm_wait_s = comm::comm_wait_seconds() - step_start_comm_wait_s_;
  period_step_s_ += s.step_seconds;
  period_wait_s_ += s.comm_wait_s;
  ++period_steps_;
  s.tokens_per_sec = static_cast<double>(tokens_per_step) / s.step_seconds;
  const double achieved_flops = s.tokens_per_sec * flops_per_token;
  std::function<double()> remeasure;  // a GPU's peak is its data sheet's: nothing to measure again
  if (device_.type == DeviceType::kCPU) remeasure = [ranks = ranks_] { return runtime::measure_peak_flops_now() * ranks; };
  s.peak_note = peak_.observe(achieved_flops, remeasure);
  s.mfu = peak_.mfu(achieved_flops);
}

void StepMeter::end_period(StepStats& s) {
  s.mean_step_s = period_step_s_ / static_cast<double>(period_steps_);
  s.mean_comm_wait_s = period_wait_s_ / static_cast<double>(period_steps_);
  period_step_s_ = period_wait_s_ = 0;
  period_steps_ = 0;
}

}  // namespace mf::train
