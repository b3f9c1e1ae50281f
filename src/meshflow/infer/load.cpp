#include "meshflow/infer/load.h"

#include <filesystem>

#include "meshflow/models/registry.h"
#include "meshflow/parallel/context.h"
#include "meshflow/plan/fit.h"
#include "meshflow/runtime/build.h"
#include "meshflow/runtime/device_select.h"
#include "meshflow/runtime/pretrained.h"
#include "meshflow/runtime/components.h"

namespace mf::infer {

LoadedModel load_for_inference(const Config& run_config, const comm::CommPtr& world) {
  // model.pretrained's structure keys the config leaves out come from the weights' config.
  const Config c = runtime::pretrained_run_config(run_config);
  runtime::apply_thread_count(c);
  const runtime::RunDevice run_device = runtime::select_run_device(c);
  const int world_size = world ? world->size() : 1;
  MF_CHECK(c.get_int("train.dist.virtual_pipeline_size") <= 1,
           "generate: train.dist.virtual_pipeline_size must be 1 (decoding runs whole pipeline stages)");
  MF_CHECK(c.get_int("train.dist.context_parallel_size") <= 1, "generate: train.dist.context_parallel_size ",
           c.get_int("train.dist.context_parallel_size"),
           ": context parallelism splits training sequences; decoding runs with context_parallel_size=1 (split the "
           "model with tensor_parallel_size or pipeline_parallel_size instead)");
  const parallel::ParallelContext ctx = parallel::ParallelContext::from_config(c, world, c.get_float("train.dist.timeout"));
  const global::ParallelDims dims = ctx.groups.dims();
  MF_CHECK(dims.batch_ranks() == 1, "generate: ", world_size, " processes make data-parallel replicas (", dims.str(),
           "): decoding splits the model only, not the batch (set the sizes of the dimensions that split the model, "
           "train.dist.tensor_parallel_size x pipeline_parallel_size, to ", world_size, ")");
  plan::check_model_state_fits(c, world, plan::ModelUse::kInference);
  LoadedModel out;
  out.main_rank = !world || world->rank() == 0;
  out.tokenizer = runtime::tokenizer_from_config(c);
  const models::PipelineStage stage = runtime::pipeline_stage(c, ctx.pipeline_size(), ctx.pipeline_stage(), 1);
  // One new position per step: no sequence to split.
  auto model = models::build_model(c, out.tokenizer->vocab_size(), {ctx.layer_place(false), stage});
  // The weights: model.pretrained, else the run's latest checkpoint (read as model.pretrained
  // reads a run folder).
  const std::string pretrained = c.get_string("model.pretrained"), dir = c.get_string("train.output_dir");
  const bool own = pretrained.empty();
  MF_CHECK(!own || std::filesystem::exists(std::filesystem::path(dir) / "checkpoints" / "latest"),
           "generate: no weights — set model.pretrained (a Hugging Face folder or a checkpoint), or train first: no "
           "checkpoint in ", dir, "/checkpoints (train.output_dir)");
  runtime::ModelWeights weights;
  try {
    weights = runtime::read_model_weights(own ? dir : pretrained, c.get_string("model.name"));
  } catch (const Error& e) {
    throw Error(std::string(own ? "train.output_dir: " : "model.pretrained: ") + e.what());
  }
  const std::string loaded = runtime::load_model_weights(*model, weights);
  if (run_device.device.type != DeviceType::kCPU) model->to_device(run_device.device);
  out.description = model->describe() + "; weights: " + loaded;
  out.engine = std::make_shared<Engine>(model, ctx.groups.ptr("pp"), world && world->size() > 1 ? world : nullptr);
  return out;
}

}  // namespace mf::infer
