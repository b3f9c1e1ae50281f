#include "meshflow/train/run.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/models/registry.h"
#include "meshflow/parallel/context.h"
#include "meshflow/runtime/build.h"
#include "meshflow/runtime/components.h"
#include "meshflow/runtime/device_select.h"
#include "meshflow/runtime/pretrained.h"
#include "meshflow/train/data_recipe.h"
#include "meshflow/train/log_hook.h"
#include "meshflow/train/trace_hook.h"

namespace mf::train {

namespace {

struct LastStats : HookBase {
  double train_loss = 0, val_loss = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> step_seconds;
  int64_t peak_bytes = 0;
  int64_t steps = 0;  // every step this process ran, logged or not
  void after_step(Trainer&, const StepStats& s) override {
    ++steps;
    train_loss = s.loss;
    if (s.ranks.empty()) return;  // not a logged step: the ranks' figures were not gathered
    double slowest = 0;
    for (const RankStepStats& r : s.ranks) {
      slowest = std::max(slowest, r.step_seconds);
      peak_bytes = std::max(peak_bytes, r.peak_bytes);
    }
    step_seconds.push_back(slowest);
  }
  void after_eval(Trainer&, const EvalStats& e) override { val_loss = e.loss; }
};


}  // namespace

runtime::RunSummary run_training(const Config& run_config, std::FILE* out, const comm::CommPtr& world) {
  // model.pretrained fixes the model's structure keys the config leaves out (its config.json's
  // rope scaling, norm epsilon, ...), before anything is built from them; a run resuming from its
  // own checkpoint reads them again while the weights are still there.
  const std::string pretrained = run_config.get_string("model.pretrained");
  const bool resuming = run_config.get_bool("train.resume") &&
                        std::filesystem::exists(std::filesystem::path(run_config.get_string("train.output_dir")) /
                                                "checkpoints" / "latest");
  std::string pretrained_note, hf_config;
  const Config c = !pretrained.empty() && (!resuming || std::filesystem::exists(pretrained))
                       ? runtime::pretrained_run_config(run_config, &pretrained_note, &hf_config)
                       : run_config;
  if (!pretrained_note.empty() && (!world || world->rank() == 0)) std::fprintf(out, "%s\n", pretrained_note.c_str());
  runtime::apply_thread_count(c);  // train.threads, before any op runs
  // train.dist.device_type first: a missing backend or GPU fails before any work; cuda makes
  // this rank's GPU the current device.
  const runtime::RunDevice run_device = runtime::select_run_device(c);
  const int world_size = world ? world->size() : 1;
  TrainOptions opts = runtime::train_options(c, world_size);  // checks the mesh against the world size first
  opts.hf_config_json = hf_config;
  MF_CHECK(world_size == 1 || world->accepts(run_device.device.type), "train.dist.device_type=cuda with ", world_size,
           " processes needs the NCCL communicator, and this build has none (configure with CUDA, MPI and NCCL)");
  const bool gpu = run_device.device.type != DeviceType::kCPU;
  if (gpu && (!world || world->rank() == 0)) std::fprintf(out, "device: %s\n", run_device.how.c_str());
  const parallel::ParallelContext ctx = parallel::ParallelContext::from_config(c, world, opts.dist_timeout_seconds);
  const int64_t dp = ctx.groups.size("dp"), dp_rank = ctx.groups.rank("dp");
  auto tok = runtime::tokenizer_from_config(c);
  const int64_t train_samples = opts.train_iter * opts.micro_batch * opts.accumulation_steps * dp;
  const models::PipelineStage stage =  // this rank's stage: its layers
      runtime::pipeline_stage(c, ctx.pipeline_size(), ctx.pipeline_stage(), opts.virtual_pipeline_size);
  auto model = models::build_model(c, tok->vocab_size(), {ctx.layer_place(), stage});
  // model.pretrained replaces the random initialisation, on every rank before the trainer takes
  // the parameters (ZeRO slices them); a run resuming from its own checkpoint does not need it.
  if (!pretrained.empty() && !resuming) {
    std::string loaded;
    try {
      loaded = runtime::load_model_weights(*model, runtime::read_model_weights(pretrained, c.get_string("model.name")), true);
    } catch (const Error& e) {
      throw Error(std::string("model.pretrained: ") + e.what());
    }
    if (!world || world->rank() == 0) std::fprintf(out, "model.pretrained: %s\n", loaded.c_str());
  }
  // Built and initialised on the host (the same values as a CPU run), then moved whole.
  if (gpu) model->to_device(run_device.device);
  RunSources data = make_sources({c, *model, *tok, opts, train_samples,
                                  opts.eval_enabled ? opts.eval_iter * opts.eval_micro_batch * dp : 0, dp_rank, dp,
                                  runtime::sequence_length(c)});
  if (!data.note.empty() && (!world || world->rank() == 0)) std::fprintf(out, "%s\n", data.note.c_str());
  Trainer trainer(opts, model, std::move(data.train), data.valid, ctx.groups);
  if (trainer.is_main_rank()) trainer.add_hook(std::make_unique<LoggingHook>(out));
  if (opts.profile.enabled) trainer.add_hook(std::make_unique<TraceHook>());
  auto last = std::make_unique<LastStats>();
  LastStats* last_ptr = last.get();
  trainer.add_hook(std::move(last));
  runtime::RunSummary s;
  s.unigram_entropy = data.unigram_entropy;
  trainer.train();
  s.iterations = trainer.iter();
  s.final_train_loss = last_ptr->train_loss;
  s.final_val_loss = last_ptr->val_loss;
  s.step_seconds = std::move(last_ptr->step_seconds);
  s.peak_bytes = last_ptr->peak_bytes;
  s.stop_signal = trainer.stop_signal();
  if (s.stop_signal != 0) return s;  // stopped by a signal: the trainer said where it saved
  if (opts.resume && last_ptr->steps == 0 && s.iterations > 0 && trainer.is_main_rank()) {
    std::fprintf(out, "train.resume: the checkpoint is at iteration %lld = train.train_iter: nothing left to train\n",
                 static_cast<long long>(opts.train_iter));
    return s;
  }
  if (opts.eval_enabled && trainer.is_main_rank() && !std::isnan(s.unigram_entropy))
    std::fprintf(out, "final validation loss %.4f nats/token vs unigram entropy %.4f nats/token of the training tokens\n",
                 s.final_val_loss, s.unigram_entropy);
  return s;
}

std::string eval_results_json(const EvalStats& e, const std::string& checkpoint, int64_t samples, int64_t tokens) {
  nlohmann::ordered_json j{{"checkpoint", checkpoint}, {"step", e.iter}, {"val_loss", e.loss}};
  // JSON has no NaN: a model without a perplexity (BERT) writes null.
  j["val_ppl"] = std::isnan(e.perplexity) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.perplexity);
  for (const auto& [name, value] : e.metrics) j["val_" + name] = value;
  j["samples"] = samples;
  j["tokens"] = tokens;
  return j.dump(2) + "\n";  // doubles as the shortest text that reads back to the same value
}

EvalStats run_evaluation(const Config& run_config, std::FILE* out, const std::string& results_file) {
  // One process, whatever layout trained the run (a tp or pp run's config.yaml once asked for its
  // mesh on a world of 1).
  const Config c = runtime::one_process_config(run_config);
  runtime::apply_thread_count(c);
  const runtime::RunDevice run_device = runtime::select_run_device(c);
  TrainOptions opts = runtime::train_options(c);
  auto tok = runtime::tokenizer_from_config(c);
  auto model = models::build_model(c, tok->vocab_size());
  MF_CHECK(opts.eval_iter > 0 && opts.eval_micro_batch > 0, "eval: train.evaluation.eval_iter (", opts.eval_iter,
           ") and train.test_micro_batch_size (", opts.eval_micro_batch, ") must be positive");
  RunSources data =
      make_sources({c, *model, *tok, opts, 0, opts.eval_iter * opts.eval_micro_batch, 0, 1, runtime::sequence_length(c)});
  auto ckpt = io::read_latest_checkpoint(opts.output_dir);
  MF_CHECK(ckpt.has_value(), "eval: no checkpoint in ", opts.output_dir, "/checkpoints (train first, or set train.output_dir)");
  runtime::ModelWeights weights;  // the run's own checkpoint, or a converted one (cast to the model's dtype)
  weights.source = ckpt->dir + "/model.safetensors";
  weights.spec = &models::model_spec(c.get_string("model.name"));
  weights.tensors = ckpt->model;
  runtime::load_model_weights(*model, weights);
  if (run_device.device.type != DeviceType::kCPU) model->to_device(run_device.device);
  opts.resume = true;
  Trainer trainer(opts, model, data.valid(), data.valid);
  EvalStats e = trainer.evaluate();
  e.iter = ckpt->state.iter;
  std::fprintf(out, "eval of %s: val_loss %.4f", ckpt->dir.c_str(), e.loss);
  if (!std::isnan(e.perplexity)) std::fprintf(out, " | val_ppl %.2f", e.perplexity);
  for (const auto& [name, value] : e.metrics) std::fprintf(out, " | val_%s %.4f", name.c_str(), value);
  std::fputc('\n', out);
  const std::string path =
      results_file.empty() ? (std::filesystem::path(opts.output_dir) / "eval_results.json").string() : results_file;
  const int64_t samples = opts.eval_iter * opts.eval_micro_batch;
  write_file_atomic(path, eval_results_json(e, ckpt->dir, samples, samples * opts.seq_length));
  std::fprintf(out, "eval results (full precision): %s\n", path.c_str());
  return e;
}

}  // namespace mf::train
