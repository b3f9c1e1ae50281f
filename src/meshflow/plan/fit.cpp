#include "meshflow/plan/fit.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "meshflow/core/error.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/models/registry.h"
#include "meshflow/plan/memory.h"
#include "meshflow/plan/model_costs.h"
#include "meshflow/runtime/build.h"
#include "meshflow/runtime/device_select.h"
#include "meshflow/runtime/options.h"

namespace mf::plan {

namespace {
// More layers than this are bounded from one layer before the model's parameters are listed.
constexpr int64_t kListedLayers = 100000;

// "124M", "6.74B", "17.6T" parameters; past 10^15, "1.2e+19".
std::string count_text(double n) {
  char buf[32];
  if (n < 1e9) std::snprintf(buf, sizeof buf, "%.3gM", n / 1e6);
  else if (n < 1e12) std::snprintf(buf, sizeof buf, "%.3gB", n / 1e9);
  else if (n < 1e15) std::snprintf(buf, sizeof buf, "%.3gT", n / 1e12);
  else std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}
}  // namespace

std::string model_state_fit(const Config& c, int64_t world_size, int64_t ranks_on_host, const HostMemory& host,
                            ModelUse use) {
  const bool training = use == ModelUse::kTraining;
  runtime::TrainOptions o;
  global::ParallelDims dims;
  try {
    o = runtime::train_options(c, static_cast<int>(world_size));
    dims = global::ParallelDims::from_config(c).resolved(world_size);
  } catch (const Error&) {
    return "";  // the run refuses the config with its own message
  }
  const int64_t tp = dims.size("tp"), pp = dims.size("pp");
  const int64_t on_host = pp > 1 ? 1 : std::max<int64_t>(1, std::min(ranks_on_host, world_size));
  const double per_rank = host.bytes / static_cast<double>(on_host);
  const std::string model = c.get_string("model.name");
  const models::ModelSpec& spec = models::model_spec(model);
  const std::string line = spec.describe ? spec.describe(c) : model;
  const std::string where = detail::cat("this host has ", host.what,
                                        on_host > 1 ? detail::cat(" for its ", on_host, " ranks") : std::string());
  // Listing every layer's parameters costs memory of its own (a name and a shape each): a model of
  // more layers than any trained one is first bounded from one layer of its sizes, the smallest.
  const int64_t layers = models::model_layers(c);
  if (layers > kListedLayers) {
    Config one = c;
    one.set("model.num_layers", "1");
    if (c.has("model.num_decoder_layers") && c.get_int("model.num_decoder_layers") > 0) one.set("model.num_decoder_layers", "1");
    std::optional<ModelCosts> m1;
    try {
      m1 = model_costs(one);
    } catch (const Error&) {  // keys that only the whole model satisfies: list it after all
    }
    if (m1 && !m1->layer_params.empty()) {
      double smallest = m1->layer_params.front().total();
      for (const ParamElements& p : m1->layer_params) smallest = std::min(smallest, p.total());
      const double bytes = static_cast<double>(layers) * smallest * static_cast<double>(m1->param_bytes) /
                           static_cast<double>(world_size);
      if (bytes > per_rank)
        return detail::cat("the model does not fit: ", line, ": ", layers, " layers of at least ",
                           smallest < 1e15 ? std::to_string(static_cast<int64_t>(smallest)) : count_text(smallest),
                           " parameters each need more than ", gigabytes(bytes), " on each rank; ", where);
    }
  }
  const ModelCosts m = model_costs(c);
  Layout l;
  l.dims = dims;
  l.schedule = o.pipeline_schedule;
  l.virtual_stages = o.virtual_pipeline_size;
  l.sequence_parallel = c.get_bool("train.dist.sequence_parallel");
  l.zero_stage = o.zero_stage;
  l.micro_batch = o.micro_batch;
  l.accumulation = o.accumulation_steps;
  if (!training) l.zero_stage = 0;
  const MemoryEstimate e = estimate_memory(c, m, l);
  const bool adamw = training && o.optim == "adamw";
  const double state = e.parameters + (training ? e.gradients : 0.0) + (adamw ? e.optimizer_state : 0.0);
  if (state <= per_rank) return "";
  const std::string layout =
      detail::cat("dp ", l.dp(), ", tp ", tp, ", pp ", pp, l.zero_stage > 0 ? detail::cat(", ZeRO-", l.zero_stage) : "");
  const std::string params = count_text(m.total_params());
  if (!training)
    return detail::cat("the model does not fit: ", line, " (", params, " parameters) holds ", gigabytes(state),
                       " of parameters on ", pp > 1 ? detail::cat("pipeline stage ", e.stage) : "each rank", " (tp ",
                       tp, ", pp ", pp, "); ", where,
                       " — split it over more ranks (train.dist.tensor_parallel_size, pipeline_parallel_size), ",
                       m.amp ? "" : "load it in bf16 (train.amp.enabled=true) ", "or choose a smaller model");
  return detail::cat("the model does not fit: ", line, " (", params, " parameters) holds ", gigabytes(state),
                     adamw ? " of parameters, gradients and AdamW state" : " of parameters and gradients", " on ",
                     pp > 1 ? detail::cat("pipeline stage ", e.stage) : "each rank",
                     " (", layout, ": parameters ", gigabytes(e.parameters), ", gradients ", gigabytes(e.gradients),
                     adamw ? ", optimizer " + gigabytes(e.optimizer_state) : std::string(), "); ", where,
                     " — spread it over more ranks (train.dist.tensor_parallel_size, pipeline_parallel_size; over "
                     "data-parallel ranks with train.zero_optimization) or choose a smaller model");
}

void check_model_state_fits(const Config& c, const comm::CommPtr& world, ModelUse use) {
  if (global::device_type_from_config(c) != DeviceType::kCPU) return;
  const std::string msg =
      model_state_fit(c, world ? world->size() : 1, runtime::local_world_size_from_env(), host_memory(), use);
  MF_CHECK(msg.empty(), msg);
}

}  // namespace mf::plan
