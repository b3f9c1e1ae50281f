#include "meshflow/train/run.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "meshflow/data/gpt_dataset.h"
#include "meshflow/parallel/context.h"
#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/split.h"
#include "meshflow/models/registry.h"
#include "meshflow/train/build.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/train/components.h"
#include "meshflow/train/device_select.h"
#include "meshflow/train/gpt_batches.h"
#include "meshflow/train/log_hook.h"
#include "meshflow/parallel/pipeline_schedule.h"
#include "meshflow/train/pretrained.h"

namespace mf::train {

std::unique_ptr<Tokenizer> tokenizer_from_config(const Config& c) {
  return tokenizer_registry().create(c.get_string("tokenization.tokenizer"), c);
}

namespace {

struct RunData {
  std::unique_ptr<IndexedDataset> indexed;
  DocumentRange train_range, valid_range;
  int64_t seq_length = 0;
};

RunData open_data(const Config& c) {
  RunData d;
  std::string prefix = c.get_string("data.data_prefix");
  MF_CHECK(!prefix.empty(), "data.data_prefix is empty: point it at a dataset made by `meshflow preprocess` "
           "(<prefix>.bin and <prefix>.idx)");
  d.indexed = std::make_unique<IndexedDataset>(prefix);
  auto ranges = split_documents(c.get_string("data.splits"), d.indexed->num_sequences());
  d.train_range = ranges[0];
  d.valid_range = ranges[1];
  d.seq_length = sequence_length(c);
  MF_CHECK(d.train_range.size() > 0, "data.splits '", c.get_string("data.splits"), "' leaves no training documents");
  return d;
}

// Entropy (nats/token) of the unigram distribution of the range's tokens, over at most
// `max_tokens` of them (the first documents of the range) so that huge corpora stay cheap.
double unigram_entropy(const IndexedDataset& data, DocumentRange r, int64_t max_tokens = int64_t{1} << 26) {
  std::unordered_map<int32_t, int64_t> counts;
  int64_t n = 0;
  for (int64_t i = r.begin; i < r.end && n < max_tokens; ++i)
    for (int32_t t : data.sequence(i)) {
      ++counts[t];
      ++n;
    }
  double h = 0;
  for (auto& [t, k] : counts) {
    double p = static_cast<double>(k) / static_cast<double>(n);
    h -= p * std::log(p);
  }
  return h;
}

struct LastStats : HookBase {
  double train_loss = 0, val_loss = std::numeric_limits<double>::quiet_NaN();
  void after_step(Trainer&, const StepStats& s) override { train_loss = s.loss; }
  void after_eval(Trainer&, const EvalStats& e) override { val_loss = e.loss; }
};


}  // namespace

RunSummary run_training(const Config& c, std::FILE* out, const comm::CommPtr& world) {
  apply_thread_count(c);  // train.threads, before any op runs
  // train.dist.device_type first: a missing backend or GPU fails before any work; cuda makes
  // this rank's GPU the current device.
  const RunDevice run_device = select_run_device(c);
  const int world_size = world ? world->size() : 1;
  TrainOptions opts = train_options(c, world_size);  // checks the mesh against the world size first
  MF_CHECK(world_size == 1 || world->accepts(run_device.device.type), "train.dist.device_type=cuda with ", world_size,
           " processes needs the NCCL communicator, and this build has none (configure with CUDA, MPI and NCCL)");
  const bool gpu = run_device.device.type != DeviceType::kCPU;
  if (gpu && (!world || world->rank() == 0)) std::fprintf(out, "device: %s\n", run_device.how.c_str());
  const parallel::ParallelContext ctx = parallel::ParallelContext::from_config(c, world, opts.dist_timeout_seconds);
  const int64_t dp = ctx.groups.dp_size(), dp_rank = ctx.groups.dp_rank();
  auto tok = tokenizer_from_config(c);
  RunData d = open_data(c);
  int64_t train_samples = opts.train_iter * opts.micro_batch * opts.accumulation_steps * dp;
  auto train_set = std::make_shared<GptDataset>(*d.indexed, d.seq_length, opts.seed, train_samples, d.train_range);
  std::shared_ptr<GptDataset> valid_set;
  if (opts.eval_enabled) {
    MF_CHECK(d.valid_range.size() > 0, "data.splits '", c.get_string("data.splits"),
             "' leaves no validation documents; change it or set train.evaluation.enabled=false");
    valid_set = std::make_shared<GptDataset>(*d.indexed, d.seq_length, opts.seed + 1,
                                             opts.eval_iter * opts.eval_micro_batch * dp, d.valid_range);
  }
  models::PipelineStage stage;
  if (ctx.pipeline_size() > 1) {  // this rank's stage: its layers
    // Chunk k of pipeline rank s is virtual stage k * pp + s of pp * virtual_pipeline_size.
    const int64_t pp = ctx.pipeline_size(), s = ctx.pipeline_stage(), v = opts.virtual_pipeline_size;
    const auto layers = pipeline_layers(c, pp * v);
    stage.first_layer = layers[static_cast<size_t>(s)].first;
    stage.end_layer = layers[static_cast<size_t>(s)].second;
    stage.first = s == 0;
    stage.last = s == pp - 1;
    for (int64_t k = 1; k < v; ++k) stage.later_chunks.push_back(layers[static_cast<size_t>(k * pp + s)]);
  }
  auto model = models::build_model(c, tok->vocab_size(), {ctx.tensor_parallel(), stage});
  // model.pretrained replaces the random initialisation, on every rank before the trainer takes
  // the parameters (ZeRO slices them); a run resuming from its own checkpoint does not need it.
  const std::string pretrained = c.get_string("model.pretrained");
  const bool resuming =
      opts.resume && std::filesystem::exists(std::filesystem::path(opts.output_dir) / "checkpoints" / "latest");
  if (!pretrained.empty() && !resuming) {
    std::string loaded;
    try {
      loaded = load_model_weights(*model, read_model_weights(pretrained, c.get_string("model.name")));
    } catch (const Error& e) {
      throw Error(std::string("model.pretrained: ") + e.what());
    }
    if (!world || world->rank() == 0) std::fprintf(out, "model.pretrained: %s\n", loaded.c_str());
  }
  // Built and initialised on the host (the same values as a CPU run), then moved whole.
  if (gpu) model->to_device(run_device.device);
  Trainer trainer(opts, model, std::make_unique<GptBatchSource>(*train_set, dp_rank, dp),
                  [valid_set, dp_rank, dp] { return std::make_unique<GptBatchSource>(*valid_set, dp_rank, dp); });
  if (ctx.mesh) trainer.set_groups(ctx.groups);
  if (trainer.is_main_rank()) trainer.add_hook(std::make_unique<LoggingHook>(out));
  auto last = std::make_unique<LastStats>();
  LastStats* last_ptr = last.get();
  trainer.add_hook(std::move(last));
  RunSummary s;
  s.unigram_entropy = unigram_entropy(*d.indexed, d.train_range);
  trainer.train();
  s.iterations = trainer.iter();
  s.final_train_loss = last_ptr->train_loss;
  s.final_val_loss = last_ptr->val_loss;
  if (opts.eval_enabled && trainer.is_main_rank())
    std::fprintf(out, "final validation loss %.4f nats/token vs unigram entropy %.4f nats/token of the training tokens\n",
                 s.final_val_loss, s.unigram_entropy);
  return s;
}

EvalStats run_evaluation(const Config& c, std::FILE* out) {
  apply_thread_count(c);
  const RunDevice run_device = select_run_device(c);
  TrainOptions opts = train_options(c);
  auto tok = tokenizer_from_config(c);
  RunData d = open_data(c);
  MF_CHECK(d.valid_range.size() > 0, "data.splits '", c.get_string("data.splits"), "' leaves no validation documents");
  GptDataset valid_set(*d.indexed, d.seq_length, opts.seed + 1, opts.eval_iter * opts.eval_micro_batch, d.valid_range);
  auto model = models::build_model(c, tok->vocab_size());
  auto ckpt = io::read_latest_checkpoint(opts.output_dir);
  MF_CHECK(ckpt.has_value(), "eval: no checkpoint in ", opts.output_dir, "/checkpoints (train first, or set train.output_dir)");
  ModelWeights weights;  // the run's own checkpoint, or a converted one (cast to the model's dtype)
  weights.source = ckpt->dir + "/model.safetensors";
  weights.spec = &models::model_spec(c.get_string("model.name"));
  weights.tensors = ckpt->model;
  load_model_weights(*model, weights);
  if (run_device.device.type != DeviceType::kCPU) model->to_device(run_device.device);
  opts.resume = true;
  Trainer trainer(opts, model, std::make_unique<GptBatchSource>(valid_set),
                  [&valid_set] { return std::make_unique<GptBatchSource>(valid_set); });
  EvalStats e = trainer.evaluate();
  e.iter = ckpt->state.iter;
  std::fprintf(out, "eval of %s: val_loss %.4f | val_ppl %.2f\n", ckpt->dir.c_str(), e.loss, e.perplexity);
  return e;
}

}  // namespace mf::train
