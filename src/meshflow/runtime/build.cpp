#include "meshflow/runtime/build.h"

#include <omp.h>

#include <algorithm>

#include "meshflow/global/parallel_dims.h"
#include "meshflow/models/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/parallel/pipeline_schedule.h"

namespace mf::runtime {

int64_t sequence_length(const Config& c) {
  const models::ModelSpec& spec = models::model_spec(c.get_string("model.name"));
  if (spec.sequence_length) return spec.sequence_length(c);
  int64_t s = c.get_int("data.seq_length");
  int64_t max = c.get_int("model.max_seq_length");
  if (s == 0) s = max;
  MF_CHECK(s > 0 && s <= max, "data.seq_length ", s, " must be in [1, model.max_seq_length = ", max, "]");
  return s;
}

int apply_thread_count(const Config& c) {
  const int64_t threads = c.get_int("train.threads");
  MF_CHECK(threads >= 0 && threads <= 1 << 16, "train.threads must be 0 (OpenMP's default) or a thread count, got ",
           threads);
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  return omp_get_max_threads();
}

models::PipelineStage pipeline_stage(const Config& c, int64_t ranks, int64_t rank, int64_t chunks) {
  models::PipelineStage stage;
  if (ranks <= 1) return stage;
  const auto layers = pipeline_layers(c, ranks * chunks);
  stage.first_layer = layers[static_cast<size_t>(rank)].first;
  stage.end_layer = layers[static_cast<size_t>(rank)].second;
  stage.first = rank == 0;
  stage.last = rank == ranks - 1;
  for (int64_t k = 1; k < chunks; ++k) stage.later_chunks.push_back(layers[static_cast<size_t>(k * ranks + rank)]);
  return stage;
}

std::vector<std::pair<int64_t, int64_t>> pipeline_layers(const Config& c, int64_t virtual_stages) {
  const int64_t layers = models::model_layers(c);
  std::vector<double> custom = c.get_float_list("train.dist.custom_pipeline_stage_id");
  if (!custom.empty()) {
    MF_CHECK(c.get_int("train.dist.virtual_pipeline_size") == 1,
             "train.dist.custom_pipeline_stage_id cannot be combined with train.dist.virtual_pipeline_size > 1");
    std::vector<int64_t> ids(custom.begin(), custom.end());
    return parallel::custom_split_layers(ids, layers, virtual_stages);
  }
  // A stage's cost is the larger of its shares of the compute and of the memory, each relative
  // to an even split. Compute: a layer is 12 C² + 2 T C multiply-adds per token, the head
  // V C. Memory (bytes per micro-batch row, proportional): weights with gradients and Adam state
  // (16 bytes per parameter: 12 C² per layer, V C for each copy of the tied embedding on the first
  // and the last stage, T C for positions on the first) and activations, ~34 T C per layer per
  // micro-batch, held for p - s micro-batches on stage s under 1F1B.
  const double C = static_cast<double>(c.get_int("model.hidden_size")), T = static_cast<double>(sequence_length(c));
  const double V = static_cast<double>(std::max<int64_t>(c.get_int("model.vocab_size"), 1));
  const double rows = static_cast<double>(std::max<int64_t>(1, c.get_int("train.train_micro_batch_size")));
  const int64_t p = virtual_stages;
  const double layer_flops = 12 * C * C + 2 * T * C, head_flops = V * C;
  auto compute = [&](int64_t k, int64_t a, int64_t b) {
    return static_cast<double>(b - a) * layer_flops + (k == p - 1 ? head_flops : 0.0);
  };
  auto memory = [&](int64_t k, int64_t a, int64_t b) {
    const double layer = 16 * 12 * C * C + static_cast<double>(p - k) * 34 * rows * T * C * 4;
    return static_cast<double>(b - a) * layer + (k == 0 ? 16 * (V * C + T * C) : 0.0) + (k == p - 1 ? 16 * V * C : 0.0);
  };
  double compute_total = 0, memory_total = 0;
  for (int64_t k = 0; k < p; ++k) {  // an even split's totals, for normalising
    compute_total += compute(k, 0, 1) * static_cast<double>(layers) / static_cast<double>(p);
    memory_total += memory(k, 0, 1) * static_cast<double>(layers) / static_cast<double>(p);
  }
  return parallel::balanced_split_layers(layers, p, [&](int64_t k, int64_t a, int64_t b) {
    return std::max(compute(k, a, b) / compute_total, memory(k, a, b) / memory_total);
  });
}

namespace {

// a x b of batch sizes; a product past int64 is a config's mistake, refused before any work.
int64_t batch_product(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  MF_CHECK(!__builtin_mul_overflow(a, b, &r), what, ": ", a, " x ", b, " overflows int64");
  return r;
}

// The batch: micro-batches per step from train.num_accumulation_steps or train.global_batch_size.
int64_t accumulation_steps(const Config& c, int64_t micro_batch, int64_t dp) {
  int64_t accum = c.get_int("train.num_accumulation_steps"), global = c.get_int("train.global_batch_size");
  const int64_t rows = batch_product(micro_batch, dp, "train.train_micro_batch_size x data_parallel_size");
  if (accum == 0) {
    if (global == 0) {
      accum = 1;
    } else {
      MF_CHECK(global % rows == 0, "train.global_batch_size ", global,
               " is not a multiple of train.train_micro_batch_size ", micro_batch, " x data_parallel_size ", dp);
      accum = global / rows;
    }
  }
  if (global != 0)
    MF_CHECK(global == batch_product(rows, accum, "train.train_micro_batch_size x data_parallel_size x "
                                                  "train.num_accumulation_steps"),
             "train.global_batch_size ", global, " != train_micro_batch_size ", micro_batch,
             " x num_accumulation_steps ", accum, " x data_parallel_size ", dp);
  return accum;
}

// train.dist.* beyond the mesh sizes. Pipeline set-ups that cannot run fail here, before any
// work: a bad schedule name, fewer layers than (virtual) stages, interleaving with micro-batches
// not a multiple of the stages.
void parallel_options(const Config& c, const global::ParallelDims& dims, TrainOptions& o) {
  const int64_t stages = dims.size("pp");
  o.pipeline_schedule = c.get_string("train.dist.pipeline_schedule");
  o.virtual_pipeline_size = c.get_int("train.dist.virtual_pipeline_size");
  // LiBai's train.dist.pipeline_num_layers: the layers placed over the stages. Every layer of the
  // model is placed here (custom_pipeline_stage_id or the balanced split), so the key can only
  // restate model.num_layers; another value is a config meant for another model.
  const int64_t layers = models::model_layers(c), placed = c.get_int("train.dist.pipeline_num_layers");
  MF_CHECK(placed == 0 || placed == layers, "train.dist.pipeline_num_layers ", placed,
           " must be 0 or the model's layers (", layers, ": model.num_layers, T5 with model.num_decoder_layers): the "
           "pipeline places all of the model's layers");
  MF_CHECK(o.virtual_pipeline_size >= 1, "train.dist.virtual_pipeline_size must be >= 1, got ", o.virtual_pipeline_size);
  MF_CHECK(o.virtual_pipeline_size == 1 || stages > 1, "train.dist.virtual_pipeline_size ",
           o.virtual_pipeline_size, " splits each pipeline stage into chunks: it needs train.dist.pipeline_parallel_size > 1");
  if (stages == 1)  // one stage: a list naming others is a config meant for a pipeline
    for (double id : c.get_float_list("train.dist.custom_pipeline_stage_id"))
      MF_CHECK(id == 0, "train.dist.custom_pipeline_stage_id names stage ", id,
               ", but there is no pipeline (train.dist.pipeline_parallel_size 1)");
  const auto schedule = parallel::parse_pipeline_schedule(o.pipeline_schedule);
  if (stages > 1) {
    pipeline_layers(c, stages * o.virtual_pipeline_size);
    parallel::pipeline_actions(schedule, stages, 0, o.accumulation_steps, o.virtual_pipeline_size);
  }
  if (c.get_bool("train.zero_optimization.enabled")) {
    o.zero_stage = c.get_int("train.zero_optimization.stage");
    MF_CHECK(o.zero_stage >= 0 && o.zero_stage <= 3, "train.zero_optimization.stage must be 0 to 3, got ", o.zero_stage);
  }
  o.dist_timeout_seconds = c.get_float("train.dist.timeout");
  o.heartbeat = c.get_bool("train.dist.heartbeat");
  MF_CHECK(o.dist_timeout_seconds > 0, "train.dist.timeout must be positive (seconds), got ", o.dist_timeout_seconds);
  const double bucket_mb = c.get_float("train.dist.grad_bucket_mb");
  MF_CHECK(bucket_mb > 0, "train.dist.grad_bucket_mb must be positive, got ", bucket_mb);
  o.grad_bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1024 * 1024));
}

// optim.*, train.scheduler.* and the fp16 loss scaling (train.amp.*).
void optimizer_options(const Config& c, TrainOptions& o) {
  o.clip_grad_max_norm = c.get_float("optim.clip_grad_max_norm");
  o.clip_grad_norm_type = c.get_float("optim.clip_grad_norm_type");
  optim::check_clip_norm_type(o.clip_grad_norm_type, "optim.clip_grad_norm_type");
  o.optim = c.get_string("optim.name");
  o.lr = c.get_float("optim.lr");
  o.weight_decay = c.get_float("optim.weight_decay");
  auto betas = c.get_float_list("optim.betas");
  MF_CHECK(betas.size() == 2, "optim.betas must hold 2 values, got ", betas.size());
  o.beta1 = betas[0];
  o.beta2 = betas[1];
  o.eps = c.get_float("optim.eps");
  o.momentum = c.get_float("optim.momentum");
  o.scheduler.name = c.get_string("train.scheduler.name");
  o.scheduler.warmup_iters = c.get_int("train.scheduler.warmup_iter");
  o.scheduler.warmup_factor = c.get_float("train.scheduler.warmup_factor");
  o.scheduler.alpha = c.get_float("train.scheduler.alpha");
  for (double m : c.get_float_list("train.scheduler.milestones")) o.scheduler.milestones.push_back(static_cast<int64_t>(m));
  o.scheduler.gamma = c.get_float("train.scheduler.gamma");
  const DType dtype = models::training_settings(c).dtype;  // a bad train.amp.dtype fails here, before any work
  o.loss_scaler.fixed_scale = c.get_float("train.amp.loss_scale");
  o.loss_scaler.initial_scale = c.get_float("train.amp.initial_loss_scale");
  o.loss_scaler.min_scale = c.get_float("train.amp.min_loss_scale");
  o.loss_scaler.window = c.get_int("train.amp.loss_scale_window");
  o.loss_scaler.hysteresis = c.get_int("train.amp.hysteresis");
  if (dtype == DType::kF16) {  // validates the scaling keys before any work
    optim::LossScalerOptions check = o.loss_scaler;
    check.enabled = true;
    optim::LossScaler{check};
  }
}

}  // namespace

TrainOptions train_options(const Config& c, int world_size) {
  TrainOptions o;
  o.output_dir = c.get_string("train.output_dir");
  o.train_iter = c.get_int("train.train_iter");
  o.exit_iter = c.get_int("train.exit_iter");
  o.micro_batch = c.get_int("train.train_micro_batch_size");
  const global::ParallelDims dims = global::ParallelDims::from_config(c).resolved(world_size);
  const int64_t batch_ranks = dims.batch_ranks();  // the ranks that take different rows: dp
  o.accumulation_steps = accumulation_steps(c, o.micro_batch, batch_ranks);
  parallel_options(c, dims, o);
  o.log_period = c.get_int("train.log_period");
  o.straggler_factor = c.get_float("train.straggler_factor");
  MF_CHECK(o.straggler_factor == 0 || o.straggler_factor > 1, "train.straggler_factor=", o.straggler_factor,
           " must be 0 (off) or above 1 (a rank this many times slower than the median is named)");
  MF_CHECK(o.log_period >= 1, "train.log_period=", o.log_period, " must be at least 1");
  o.profile.enabled = c.get_bool("train.profile.enabled");
  o.profile.start_step = c.get_int("train.profile.start_step");
  o.profile.num_steps = c.get_int("train.profile.num_steps");
  MF_CHECK(o.profile.start_step >= 1 && o.profile.num_steps >= 1, "train.profile.start_step=", o.profile.start_step,
           " and train.profile.num_steps=", o.profile.num_steps, " must be at least 1");
  o.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  o.checkpoint_period = c.get_int("train.checkpointer.period");
  o.max_to_keep = c.get_int("train.checkpointer.max_to_keep");
  o.resume = c.get_bool("train.resume");
  o.eval_enabled = c.get_bool("train.evaluation.enabled");
  o.eval_period = c.get_int("train.evaluation.eval_period");
  o.eval_iter = c.get_int("train.evaluation.eval_iter");
  o.eval_micro_batch = c.get_int("train.test_micro_batch_size");
  o.seq_length = sequence_length(c);
  // What the run multiplies out (tokens per step, the samples of the run and of an evaluation; see
  // run.cpp and Trainer::tokens_per_step) must be countable.
  // (micro-batch x data-parallel was checked by accumulation_steps.)
  const int64_t rows = batch_product(o.micro_batch * batch_ranks, o.accumulation_steps, "samples per step");
  batch_product(rows, o.seq_length, "tokens per step (samples per step x data.seq_length)");
  batch_product(rows, o.train_iter, "samples of the run (train.train_iter x samples per step)");
  const int64_t eval_rows = batch_product(o.eval_micro_batch, batch_ranks, "samples per evaluation step");
  batch_product(eval_rows, o.eval_iter, "samples of an evaluation (train.evaluation.eval_iter x samples per step)");
  batch_product(eval_rows, o.seq_length, "tokens per evaluation step");
  optimizer_options(c, o);
  o.config_yaml = c.dump();
  return o;
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

}  // namespace mf::runtime
