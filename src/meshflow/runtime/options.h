// The typed run configuration: what a training run reads from its Config (train.*, optim.*,
// the parallel sizes' consequences), filled and checked by runtime/build.h's train_options().
// Training, planning and the launcher share it without depending on each other.
#pragma once
#include <cstdint>
#include <string>

#include "meshflow/optim/loss_scaler.h"
#include "meshflow/optim/scheduler.h"

namespace mf::runtime {

struct TrainOptions {
  std::string output_dir = "output";
  int64_t train_iter = 100;
  int64_t exit_iter = 0;  // > 0: checkpoint and stop after this iteration (as if interrupted)
  int64_t micro_batch = 4;
  int64_t accumulation_steps = 1;
  int64_t log_period = 10;
  double straggler_factor = 0;  // train.straggler_factor (0 = off)
  uint64_t seed = 1234;
  int64_t checkpoint_period = 0;  // 0: only at the end
  int64_t max_to_keep = 2;
  bool resume = false;
  bool eval_enabled = true;
  int64_t eval_period = 0;  // 0: only at the end
  int64_t eval_iter = 10;
  int64_t eval_micro_batch = 4;
  double clip_grad_max_norm = 1.0;
  double clip_grad_norm_type = 2.0;  // 2.0 (L2) or +infinity (the largest |element|)
  std::string optim = "adamw";
  double lr = 6e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, momentum = 0.9;
  optim::SchedulerConfig scheduler;
  int64_t seq_length = 128;
  // Data parallelism (train.dist.*): the gradient bucket size and the collective timeout.
  int64_t grad_bucket_bytes = int64_t{25} << 20;
  double dist_timeout_seconds = 300;
  bool heartbeat = false;  // train.dist.heartbeat: the failure watchdog of multi-rank runs (comm/watchdog.h)
  std::string pipeline_schedule = "1f1b";  // with pipeline parallelism (pipeline_schedule.h)
  int64_t virtual_pipeline_size = 1;       // model chunks per rank (interleaved_1f1b)
  // ZeRO (train.zero_optimization), over the data-parallel group: 1 = each dp rank keeps and
  // updates 1/dp of every parameter's optimizer state (a flat S(0) slice), then the parameters
  // are all-gathered; 2 = also the gradients are reduce-scattered into those slices; 3 = also
  // the parameters are kept as slices and gathered unit by unit (parallel/zero_shards.h).
  int64_t zero_stage = 0;
  // Mixed precision is on when the model's parameters are bf16/f16 (train.amp); fp16 then scales
  // the loss (loss_scaler.h; `enabled` is set from the model's dtype).
  optim::LossScalerOptions loss_scaler;
  std::string config_yaml;  // resolved config, written to <output_dir>/config.yaml
  // The Hugging Face config.json of the model.pretrained weights, written beside it as
  // hf_config.json ("" none): `convert --to-hf` of the run writes back its fields.
  std::string hf_config_json;
  // train.profile: steps [start_step, start_step + num_steps) recorded as a timeline (trace_hook.h).
  struct Profile {
    bool enabled = false;
    int64_t start_step = 3, num_steps = 2;
  } profile;
};

}  // namespace mf::runtime
