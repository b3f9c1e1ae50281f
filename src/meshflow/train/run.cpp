#include "meshflow/train/run.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/data/bert_dataset.h"
#include "meshflow/data/classification_dataset.h"
#include "meshflow/data/gpt_dataset.h"
#include "meshflow/parallel/context.h"
#include "meshflow/data/indexed_dataset.h"
#include "meshflow/data/split.h"
#include "meshflow/data/t5_dataset.h"
#include "meshflow/models/registry.h"
#include "meshflow/train/bert_batches.h"
#include "meshflow/train/build.h"
#include "meshflow/io/checkpoint.h"
#include "meshflow/train/components.h"
#include "meshflow/train/device_select.h"
#include "meshflow/train/gpt_batches.h"
#include "meshflow/train/image_batches.h"
#include "meshflow/train/log_hook.h"
#include "meshflow/train/trace_hook.h"
#include "meshflow/parallel/pipeline_schedule.h"
#include "meshflow/train/pretrained.h"
#include "meshflow/train/t5_batches.h"

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

// by_document: split data.splits over documents (sentence-split data: several sequences each),
// else over sequences (one per document as our builder writes them).
RunData open_data(const Config& c, bool by_document = false) {
  RunData d;
  std::string prefix = c.get_string("data.data_prefix");
  MF_CHECK(!prefix.empty(), "data.data_prefix is empty: point it at a dataset made by `meshflow preprocess` "
           "(<prefix>.bin and <prefix>.idx)");
  d.indexed = std::make_unique<IndexedDataset>(prefix);
  auto ranges = split_documents(c.get_string("data.splits"),
                                by_document ? d.indexed->num_documents() : d.indexed->num_sequences());
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

// The run's batches for its model's kind (Model::batch_kind()): the training source and a maker
// of validation sources, with the datasets they read kept alive.
struct RunSources {
  std::unique_ptr<BatchSource> train;
  std::function<std::unique_ptr<BatchSource>()> valid;
  std::shared_ptr<void> keep;
  double unigram_entropy = std::numeric_limits<double>::quiet_NaN();  // causal LM: the baseline
  std::string note;  // one line for the log ("" none)
};

// train_samples: the run's samples (0: none, evaluation only); valid_samples: per evaluation.
RunSources make_sources(const Config& c, const models::Model& model, const Tokenizer& tok, const TrainOptions& o,
                        int64_t train_samples, int64_t valid_samples, int64_t dp_rank, int64_t dp) {
  RunSources r;
  const int64_t seq = sequence_length(c);
  const models::BatchKind kind = model.batch_kind();
  // The BERT family pads with the tokenizer's padding token; RoBERTa's positions count from it.
  auto special_tokens = [&] {
    const BertSpecialTokens s = bert_special_tokens(tok);
    const int64_t pad = c.get_int("model.pad_token_id");
    MF_CHECK(s.pad == pad, "model.pad_token_id ", pad, " is not the tokenizer's padding token ", tok.id_to_token(s.pad),
             " (id ", s.pad, "): set model.pad_token_id=", s.pad);
    return s;
  };
  if (kind == models::BatchKind::kSequenceClassification) {
    const BertSpecialTokens special = special_tokens();
    auto open = [&](const char* key, uint64_t seed, int64_t samples) {
      const std::string path = c.get_string(key);
      MF_CHECK(!path.empty(), key, " is empty: a sequence classifier trains on jsonl lines of {\"text\": ..., "
               "\"label\": <integer>} (scripts/make_fortune_classification.sh writes an example)");
      ClassificationOptions co;
      co.seq_length = seq;
      co.seed = seed;
      co.num_samples = samples;
      return std::make_shared<ClassificationDataset>(path, tok, special.cls, special.sep, special.pad, co);
    };
    std::shared_ptr<ClassificationDataset> train, valid;
    if (train_samples > 0) train = open("data.train_file", o.seed, train_samples);
    if (valid_samples > 0) valid = open("data.validation_file", o.seed + 1, 0);
    const int64_t labels = c.get_int("model.num_labels");
    for (const auto& d : {train, valid})
      MF_CHECK(!d || d->num_labels() <= labels, "classification data: labels up to ", d ? d->num_labels() - 1 : 0,
               " for model.num_labels ", labels);
    if (train) r.train = std::make_unique<ClassificationBatchSource>(*train, seq, dp_rank, dp);
    if (valid) {
      r.valid = [valid, seq, dp_rank, dp] { return std::make_unique<ClassificationBatchSource>(*valid, seq, dp_rank, dp); };
      const std::vector<int64_t> counts = valid->label_counts();
      const int64_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
      const bool wraps = valid_samples > valid->num_examples();
      r.note = detail::cat("classification: ", train ? train->num_examples() : 0, " training examples, ",
                           valid->num_examples(), " held out (", valid_samples, " scored per evaluation, in order",
                           wraps ? ", the first ones again after the last" : "", "), majority class ",
                           static_cast<double>(most) / static_cast<double>(std::max<int64_t>(1, valid->num_examples())),
                           " of them");
    }
    r.keep = std::make_shared<std::pair<decltype(train), decltype(valid)>>(train, valid);
    return r;
  }
  if (kind == models::BatchKind::kImageClassification) {  // ViT: image folders or packed images
    ImageSources img = image_sources(c, o.seed, train_samples, valid_samples, dp_rank, dp);
    r.train = std::move(img.train);
    r.valid = std::move(img.valid);
    r.note = img.note;
    r.keep = std::make_shared<std::pair<std::shared_ptr<ImageDataset>, std::shared_ptr<ImageDataset>>>(img.train_data,
                                                                                                      img.valid_data);
    return r;
  }
  if (kind == models::BatchKind::kSpanCorruption) {
    // T5: span corruption over sentence-split documents; the encoder reads data.seq_length tokens,
    // the decoder model.decoder_seq_length.
    T5SpecialTokens special;
    special.pad = static_cast<int32_t>(c.get_int("model.pad_token_id"));
    special.eos = tok.eod_id();
    special.sentinels = t5_sentinel_ids(tok);
    special.vocab_size = tok.vocab_size();
    MF_CHECK(!special.sentinels.empty(), "span corruption needs the sentinel tokens <extra_id_0>, <extra_id_1>, ... "
             "and the ", tok.name(), " tokenizer has none: set tokenization.extra_ids=100 (T5's) on a sentencepiece "
             "tokenizer");
    if (std::optional<int32_t> p = tok.token_to_id("<pad>"))
      MF_CHECK(*p == special.pad, "model.pad_token_id ", special.pad, " is not the tokenizer's <pad> (id ", *p,
               "): set model.pad_token_id=", *p);
    const int64_t dec = c.get_int("model.decoder_seq_length");
    MF_CHECK(dec > 0, "model.decoder_seq_length ", dec, " must be a length (114 for a 512-token encoder input)");
    auto d = std::make_shared<RunData>(open_data(c, /*by_document=*/true));
    auto open = [&](DocumentRange range, uint64_t seed, int64_t samples) {
      T5DatasetOptions to;
      to.encoder_length = seq;
      to.decoder_length = dec;
      to.seed = seed;
      to.num_samples = samples;
      to.documents = range;
      to.noise_density = c.get_float("data.noise_density");
      to.mean_noise_span_length = c.get_float("data.mean_noise_span_length");
      to.short_seq_prob = c.get_float("data.short_seq_prob");
      return std::make_shared<T5Dataset>(*d->indexed, special, to);
    };
    std::shared_ptr<T5Dataset> train, valid;
    if (train_samples > 0) train = open(d->train_range, o.seed, train_samples);
    if (valid_samples > 0) {
      MF_CHECK(d->valid_range.size() > 0, "data.splits '", c.get_string("data.splits"),
               "' leaves no validation documents; change it or set train.evaluation.enabled=false");
      valid = open(d->valid_range, o.seed + 1, valid_samples);
    }
    if (train) r.train = std::make_unique<T5BatchSource>(*train, dp_rank, dp);
    if (valid) r.valid = [valid, dp_rank, dp] { return std::make_unique<T5BatchSource>(*valid, dp_rank, dp); };
    const T5Dataset& any = train ? *train : *valid;
    r.note = detail::cat("span corruption: raw samples of up to ", any.raw_length(), " tokens, encoder ",
                         any.encoder_length(), " and decoder ", any.decoder_length(), " tokens, up to ",
                         any.max_spans(), " noise spans (", special.sentinels.size(), " sentinels)");
    r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
    return r;
  }
  const bool bert = kind == models::BatchKind::kMaskedLM;
  auto d = std::make_shared<RunData>(open_data(c, bert));
  if (bert) {
    const BertSpecialTokens special = special_tokens();
    const bool nsp = c.get_string("model.name") == "bert" && c.get_bool("model.add_binary_head");
    auto open = [&](DocumentRange range, uint64_t seed, int64_t samples) {
      BertDatasetOptions bo;
      bo.seq_length = seq;
      bo.seed = seed;
      bo.num_samples = samples;
      bo.documents = range;
      bo.masked_lm_prob = c.get_float("data.masked_lm_prob");
      bo.short_seq_prob = c.get_float("data.short_seq_prob");
      bo.whole_word_masking = c.get_bool("data.whole_word_masking");
      bo.binary_head = nsp;
      return std::make_shared<BertDataset>(*d->indexed, special, bo);
    };
    std::shared_ptr<BertDataset> train, valid;
    if (train_samples > 0) train = open(d->train_range, o.seed, train_samples);
    if (valid_samples > 0) {
      MF_CHECK(d->valid_range.size() > 0, "data.splits '", c.get_string("data.splits"),
               "' leaves no validation documents; change it or set train.evaluation.enabled=false");
      valid = open(d->valid_range, o.seed + 1, valid_samples);
    }
    if (train) r.train = std::make_unique<BertBatchSource>(*train, seq, nsp, dp_rank, dp);
    if (valid) r.valid = [valid, seq, nsp, dp_rank, dp] { return std::make_unique<BertBatchSource>(*valid, seq, nsp, dp_rank, dp); };
    r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
    return r;
  }
  std::shared_ptr<GptDataset> train, valid;
  if (train_samples > 0) {
    train = std::make_shared<GptDataset>(*d->indexed, d->seq_length, o.seed, train_samples, d->train_range);
    r.unigram_entropy = unigram_entropy(*d->indexed, d->train_range);
  }
  if (valid_samples > 0) {
    MF_CHECK(d->valid_range.size() > 0, "data.splits '", c.get_string("data.splits"),
             "' leaves no validation documents; change it or set train.evaluation.enabled=false");
    valid = std::make_shared<GptDataset>(*d->indexed, d->seq_length, o.seed + 1, valid_samples, d->valid_range);
  }
  if (train) r.train = std::make_unique<GptBatchSource>(*train, dp_rank, dp);
  if (valid) r.valid = [valid, dp_rank, dp] { return std::make_unique<GptBatchSource>(*valid, dp_rank, dp); };
  r.keep = std::make_shared<std::tuple<decltype(d), decltype(train), decltype(valid)>>(d, train, valid);
  return r;
}

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

RunSummary run_training(const Config& run_config, std::FILE* out, const comm::CommPtr& world) {
  // model.pretrained fixes the model's structure keys the config leaves out (its config.json's
  // rope scaling, norm epsilon, ...), before anything is built from them; a run resuming from its
  // own checkpoint reads them again while the weights are still there.
  const std::string pretrained = run_config.get_string("model.pretrained");
  const bool resuming = run_config.get_bool("train.resume") &&
                        std::filesystem::exists(std::filesystem::path(run_config.get_string("train.output_dir")) /
                                                "checkpoints" / "latest");
  std::string pretrained_note, hf_config;
  const Config c = !pretrained.empty() && (!resuming || std::filesystem::exists(pretrained))
                       ? pretrained_run_config(run_config, &pretrained_note, &hf_config)
                       : run_config;
  if (!pretrained_note.empty() && (!world || world->rank() == 0)) std::fprintf(out, "%s\n", pretrained_note.c_str());
  apply_thread_count(c);  // train.threads, before any op runs
  // train.dist.device_type first: a missing backend or GPU fails before any work; cuda makes
  // this rank's GPU the current device.
  const RunDevice run_device = select_run_device(c);
  const int world_size = world ? world->size() : 1;
  TrainOptions opts = train_options(c, world_size);  // checks the mesh against the world size first
  opts.hf_config_json = hf_config;
  MF_CHECK(world_size == 1 || world->accepts(run_device.device.type), "train.dist.device_type=cuda with ", world_size,
           " processes needs the NCCL communicator, and this build has none (configure with CUDA, MPI and NCCL)");
  const bool gpu = run_device.device.type != DeviceType::kCPU;
  if (gpu && (!world || world->rank() == 0)) std::fprintf(out, "device: %s\n", run_device.how.c_str());
  const parallel::ParallelContext ctx = parallel::ParallelContext::from_config(c, world, opts.dist_timeout_seconds);
  const int64_t dp = ctx.groups.size("dp"), dp_rank = ctx.groups.rank("dp");
  auto tok = tokenizer_from_config(c);
  const int64_t train_samples = opts.train_iter * opts.micro_batch * opts.accumulation_steps * dp;
  const models::PipelineStage stage =  // this rank's stage: its layers
      pipeline_stage(c, ctx.pipeline_size(), ctx.pipeline_stage(), opts.virtual_pipeline_size);
  auto model = models::build_model(c, tok->vocab_size(), {ctx.tensor_parallel(), stage});
  // model.pretrained replaces the random initialisation, on every rank before the trainer takes
  // the parameters (ZeRO slices them); a run resuming from its own checkpoint does not need it.
  if (!pretrained.empty() && !resuming) {
    std::string loaded;
    try {
      loaded = load_model_weights(*model, read_model_weights(pretrained, c.get_string("model.name")), true);
    } catch (const Error& e) {
      throw Error(std::string("model.pretrained: ") + e.what());
    }
    if (!world || world->rank() == 0) std::fprintf(out, "model.pretrained: %s\n", loaded.c_str());
  }
  // Built and initialised on the host (the same values as a CPU run), then moved whole.
  if (gpu) model->to_device(run_device.device);
  RunSources data = make_sources(c, *model, *tok, opts, train_samples,
                                 opts.eval_enabled ? opts.eval_iter * opts.eval_micro_batch * dp : 0, dp_rank, dp);
  if (!data.note.empty() && (!world || world->rank() == 0)) std::fprintf(out, "%s\n", data.note.c_str());
  Trainer trainer(opts, model, std::move(data.train), data.valid, ctx.groups);
  if (trainer.is_main_rank()) trainer.add_hook(std::make_unique<LoggingHook>(out));
  if (opts.profile.enabled) trainer.add_hook(std::make_unique<TraceHook>());
  auto last = std::make_unique<LastStats>();
  LastStats* last_ptr = last.get();
  trainer.add_hook(std::move(last));
  RunSummary s;
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

Config one_process_config(const Config& run_config) {
  Config c = run_config;
  // Every parallel dimension of one rank (the elastic one, dp, derived: 1 on one process).
  for (const global::DimSpec& d : global::dim_specs()) c.set(d.config_key, d.elastic ? "0" : "1", "eval (one process)");
  for (const auto& [key, value] : {std::pair<const char*, const char*>{"train.dist.virtual_pipeline_size", "1"},
                                   {"train.dist.pipeline_num_layers", "0"},
                                   {"train.dist.custom_pipeline_stage_id", "[]"},
                                   {"train.dist.sequence_parallel", "false"},
                                   {"train.zero_optimization.enabled", "false"}})
    c.set(key, value, "eval (one process)");
  return c;
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
  const Config c = one_process_config(run_config);
  apply_thread_count(c);
  const RunDevice run_device = select_run_device(c);
  TrainOptions opts = train_options(c);
  auto tok = tokenizer_from_config(c);
  auto model = models::build_model(c, tok->vocab_size());
  MF_CHECK(opts.eval_iter > 0 && opts.eval_micro_batch > 0, "eval: train.evaluation.eval_iter (", opts.eval_iter,
           ") and train.test_micro_batch_size (", opts.eval_micro_batch, ") must be positive");
  RunSources data = make_sources(c, *model, *tok, opts, 0, opts.eval_iter * opts.eval_micro_batch, 0, 1);
  auto ckpt = io::read_latest_checkpoint(opts.output_dir);
  MF_CHECK(ckpt.has_value(), "eval: no checkpoint in ", opts.output_dir, "/checkpoints (train first, or set train.output_dir)");
  ModelWeights weights;  // the run's own checkpoint, or a converted one (cast to the model's dtype)
  weights.source = ckpt->dir + "/model.safetensors";
  weights.spec = &models::model_spec(c.get_string("model.name"));
  weights.tensors = ckpt->model;
  load_model_weights(*model, weights);
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
