#include "meshflow/train/log_hook.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "meshflow/global/parallel_dims.h"
#include "meshflow/train/stragglers.h"

namespace mf::train {

void LoggingHook::before_train(Trainer& t) {
  const TrainOptions& o = t.options();
  metrics_ = std::make_unique<MetricsWriter>(o.output_dir, t.iter() > 0 ? std::optional<int64_t>(t.iter()) : std::nullopt);
  tb_ = std::make_unique<TensorBoardWriter>((std::filesystem::path(o.output_dir) / "tensorboard").string());
  bar_ = std::make_unique<ProgressBar>(o.train_iter, out_);
  first_iter_ = t.iter();
  start_ = std::chrono::steady_clock::now();
  std::fprintf(out_, "training %s: %.2fM parameters, %lld iterations of %lld tokens (micro batch %lld x %lld accumulation x %lld "
               "tokens), from iteration %lld; MFU over a peak of %.1f GFLOP/s (%s)\n",
               t.model().describe().c_str(), static_cast<double>(t.model().num_logical_parameters()) / 1e6,
               static_cast<long long>(o.train_iter), static_cast<long long>(t.tokens_per_step()),
               static_cast<long long>(o.micro_batch), static_cast<long long>(o.accumulation_steps),
               static_cast<long long>(o.seq_length), static_cast<long long>(t.iter()), t.peak_flops() / 1e9,
               t.peak_source().c_str());
  std::fflush(out_);
}

void LoggingHook::after_step(Trainer& t, const StepStats& s) {
  if (!memory_reported_) {  // once, after the first step has allocated everything
    memory_reported_ = true;
    const MemoryReport& m = s.memory;
    if (bar_->enabled()) std::fputc('\n', out_);
    std::fprintf(out_, "memory (rank 0): parameters %.3f GB | gradients %.3f GB | optimizer state %.3f GB | "
                 "activations and workspace (peak) %.3f GB, of which communication buffers %.3f GB | peak %.3f GB\n",
                 m.parameters / 1e9, m.gradients / 1e9, m.optimizer_state / 1e9, m.activations / 1e9,
                 m.comm_buffers / 1e9, m.peak / 1e9);
  }
  if (!s.peak_note.empty()) {
    if (bar_->enabled()) std::fputc('\n', out_);
    std::fprintf(out_, "iter %lld: %s\n", static_cast<long long>(s.iter), s.peak_note.c_str());
  }
  loss_sum_ += s.loss;
  time_sum_ += s.step_seconds;
  tokens_ += static_cast<double>(t.tokens_per_step());
  ++steps_;
  bar_->update(s.iter, s.loss, s.tokens_per_sec);
  const TrainOptions& o = t.options();
  if (!t.log_step(s.iter)) return;
  double loss = loss_sum_ / static_cast<double>(steps_);
  double tps = tokens_ / time_sum_;
  double mfu = t.peak_flops() > 0 ? tps * t.model().flops_per_token(o.seq_length) / t.peak_flops() : 0.0;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = elapsed / static_cast<double>(s.iter - first_iter_) * static_cast<double>(o.train_iter - s.iter);
  if (bar_->enabled()) std::fputc('\n', out_);
  // Mixed precision adds the loss scale and the updates skipped on overflow so far.
  char amp[96] = "";
  if (t.mixed_precision())
    std::snprintf(amp, sizeof amp, " | loss_scale %.6g | skipped %lld", s.loss_scale, static_cast<long long>(s.skipped_iters));
  std::fprintf(out_, "iter %lld/%lld | loss %.4f | lr %.3e | grad_norm %.3f%s | %s tok/s | MFU %.1f%% | peak mem %.2f GB | ETA %s\n",
               static_cast<long long>(s.iter), static_cast<long long>(o.train_iter), loss, s.lr, s.grad_norm, amp,
               format_rate(tps).c_str(), 100 * mfu, static_cast<double>(s.peak_bytes) / 1e9, format_duration(eta).c_str());
  std::fflush(out_);
  nlohmann::ordered_json fields{{"step", s.iter},
                                {"loss", loss},
                                {"lr", s.lr},
                                {"grad_norm", s.grad_norm},
                                {"tokens_per_sec", tps},
                                {"mfu", mfu},
                                {"peak_flops", t.peak_flops()},
                                {"peak_bytes", s.peak_bytes},
                                {"step_time", time_sum_ / static_cast<double>(steps_)}};
  fields["mem_parameters"] = s.memory.parameters;
  fields["mem_gradients"] = s.memory.gradients;
  fields["mem_optimizer_state"] = s.memory.optimizer_state;
  fields["mem_activations"] = s.memory.activations;
  fields["mem_comm_buffers"] = s.memory.comm_buffers;
  if (t.mixed_precision()) {
    fields["loss_scale"] = s.loss_scale;
    fields["skipped_iters"] = s.skipped_iters;
  }
  if (t.groups().dims().product() > 1) {
    // The last step: bytes a ring algorithm sends for this rank's communication (estimated from
    // tensor sizes), and the gradient-reduction time not hidden behind backward.
    fields["comm_bytes_est"] = s.comm_bytes_est;
    fields["exposed_comm_time"] = s.exposed_comm_s;
  }
  // Every rank's figures of this (the last) step, by world rank.
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const RankStepStats& r : s.ranks) {
    // Its place: "stage" (the pipeline stage), then its index along each other dimension.
    nlohmann::ordered_json place = {{"rank", r.rank}};
    for (size_t i = 0; i < r.coordinate.size(); ++i) {
      const std::string name = global::dim_specs()[i].name;
      place[name == "pp" ? "stage" : name] = r.coordinate[i];
    }
    const nlohmann::ordered_json figures = {{"step_time", r.step_seconds},
                                            {"exposed_comm_time", r.exposed_comm_s},
                                            {"pipeline_wait_time", r.pipeline_wait_s},
                                            {"comm_wait_time", r.comm_wait_s},
                                            {"mean_step_time", r.mean_step_s},
                                            {"mean_compute_time", r.mean_compute_s()},
                                            {"peak_bytes", r.peak_bytes},
                                            {"mem_parameters", r.memory.parameters},
                                            {"mem_gradients", r.memory.gradients},
                                            {"mem_optimizer_state", r.memory.optimizer_state},
                                            {"mem_activations", r.memory.activations},
                                            {"mem_comm_buffers", r.memory.comm_buffers}};
    for (const auto& [key, value] : figures.items()) place[key] = value;
    ranks.push_back(std::move(place));
  }
  if (!ranks.empty()) fields["ranks"] = std::move(ranks);
  // Ranks whose compute time exceeds the median rank's by train.straggler_factor (this step).
  const std::vector<Straggler> slow = find_stragglers(s.ranks, o.straggler_factor);
  if (!slow.empty()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    std::string line;
    for (const Straggler& x : slow) {
      list.push_back({{"rank", x.rank}, {"mean_compute_time", x.compute_s}, {"median_mean_compute_time", x.median_compute_s},
                      {"ratio", x.ratio}});
      char b[160];
      std::snprintf(b, sizeof b, "%srank %d (compute %.3f s per step, %.1fx the median %.3f s)", line.empty() ? "" : ", ",
                    x.rank, x.compute_s, x.ratio, x.median_compute_s);
      line += b;
    }
    fields["stragglers"] = std::move(list);
    std::fprintf(out_, "stragglers at iter %lld (compute time per step since the last log over %.3gx the median rank's): %s\n",
                 static_cast<long long>(s.iter), o.straggler_factor, line.c_str());
    std::fflush(out_);
  }
  metrics_->write(fields);
  tb_->add_scalar("train/loss", loss, s.iter);
  tb_->add_scalar("train/lr", s.lr, s.iter);
  tb_->add_scalar("train/grad_norm", s.grad_norm, s.iter);
  tb_->add_scalar("train/tokens_per_sec", tps, s.iter);
  tb_->add_scalar("train/mfu", mfu, s.iter);
  if (t.mixed_precision()) tb_->add_scalar("train/loss_scale", s.loss_scale, s.iter);
  tb_->flush();
  loss_sum_ = time_sum_ = tokens_ = 0;
  steps_ = 0;
}

void LoggingHook::after_eval(Trainer&, const EvalStats& e) {
  if (bar_ && bar_->enabled()) std::fputc('\n', out_);
  std::fprintf(out_, "eval iter %lld | val_loss %.4f", static_cast<long long>(e.iter), e.loss);
  nlohmann::ordered_json record = {{"step", e.iter}, {"val_loss", e.loss}};
  if (!std::isnan(e.perplexity)) {
    std::fprintf(out_, " | val_ppl %.2f", e.perplexity);
    record["val_ppl"] = e.perplexity;
    tb_->add_scalar("eval/perplexity", e.perplexity, e.iter);
  }
  for (const auto& [name, value] : e.metrics) {
    std::fprintf(out_, " | val_%s %.4f", name.c_str(), value);
    record["val_" + name] = value;
    tb_->add_scalar("eval/" + name, value, e.iter);
  }
  std::fputc('\n', out_);
  std::fflush(out_);
  metrics_->write(record);
  tb_->add_scalar("eval/loss", e.loss, e.iter);
  tb_->flush();
}

void LoggingHook::after_train(Trainer&) {
  if (bar_) bar_->finish();
  if (tb_) tb_->flush();
}

}  // namespace mf::train
