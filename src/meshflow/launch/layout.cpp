// Layouts of a supervised job on fewer processes: the same global batch by more accumulation.
#include "meshflow/launch/layout.h"

#include <algorithm>

#include "meshflow/core/error.h"
#include "meshflow/global/device_mesh.h"
#include "meshflow/train/build.h"

namespace mf::launch {

Layout run_layout(const Config& c, int nproc) {
  MF_CHECK(nproc >= 1, "launch: the number of processes must be at least 1, got ", nproc);
  const train::TrainOptions o = train::train_options(c, nproc);  // the trainer's own checks
  const global::MeshSizes mesh = global::resolve_mesh_sizes(global::MeshSizes::from_config(c), nproc);
  Layout l;
  l.nproc = nproc;
  l.tp = mesh.tensor;
  l.pp = mesh.pipeline;
  l.dp = mesh.data;
  l.micro_batch = o.micro_batch;
  l.accumulation = o.accumulation_steps;
  return l;
}

std::vector<std::string> layout_overrides(const Layout& l) {
  return {"train.dist.data_parallel_size=" + std::to_string(l.dp),
          "train.num_accumulation_steps=" + std::to_string(l.accumulation),
          "train.global_batch_size=" + std::to_string(l.global_batch())};
}

Layout moved_layout(const Config& c, const Layout& base, int nproc) {
  MF_CHECK(nproc >= 1, "launch: the number of processes must be at least 1, got ", nproc);
  const int64_t model_ranks = base.tp * base.pp;
  MF_CHECK(nproc % model_ranks == 0, "launch: ", nproc, " processes cannot hold tensor_parallel_size ", base.tp,
           " x pipeline_parallel_size ", base.pp, " (kept on a restart): use a multiple of ", model_ranks);
  Layout l = base;
  l.nproc = nproc;
  l.dp = nproc / model_ranks;
  const int64_t global = base.global_batch(), per_step = base.micro_batch * l.dp;
  MF_CHECK(global % per_step == 0, "launch: on ", nproc, " processes (data_parallel_size ", l.dp,
           ") the global batch ", global, " is not a multiple of train_micro_batch_size ", base.micro_batch, " x ",
           l.dp, ", so it cannot be kept by accumulation");
  l.accumulation = global / per_step;
  Config moved = c;
  for (const std::string& kv : layout_overrides(l)) moved.apply_override(kv);
  try {
    (void)train::train_options(moved, nproc);  // e.g. interleaved pipelines' micro-batch counts
  } catch (const Error& e) {
    throw Error(detail::cat("launch: the run on ", nproc, " processes (data_parallel_size ", l.dp,
                            ", num_accumulation_steps ", l.accumulation, ") is refused: ", e.what()));
  }
  return l;
}

std::optional<int> next_smaller_nproc(const Config& c, const Layout& base, int current, int min_nproc) {
  for (int n = current - 1; n >= std::max(1, min_nproc); --n) {
    try {
      (void)moved_layout(c, base, n);
      return n;
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

}  // namespace mf::launch
