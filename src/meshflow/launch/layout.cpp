// Layouts of a supervised job on fewer processes: the same global batch by more accumulation.
#include "meshflow/launch/layout.h"

#include <algorithm>

#include "meshflow/core/error.h"
#include "meshflow/global/parallel_dims.h"
#include "meshflow/runtime/build.h"

namespace mf::launch {

Layout run_layout(const Config& c, int nproc) {
  MF_CHECK(nproc >= 1, "launch: the number of processes must be at least 1, got ", nproc);
  const runtime::TrainOptions o = runtime::train_options(c, nproc);  // the trainer's own checks
  Layout l;
  l.nproc = nproc;
  l.dims = global::ParallelDims::from_config(c).resolved(nproc);
  l.micro_batch = o.micro_batch;
  l.accumulation = o.accumulation_steps;
  return l;
}

std::vector<std::string> layout_overrides(const Layout& l) {
  const size_t e = global::elastic_dim();
  return {detail::cat(global::dim_specs()[e].config_key, "=", l.dims.size(e)),
          "train.num_accumulation_steps=" + std::to_string(l.accumulation),
          "train.global_batch_size=" + std::to_string(l.global_batch())};
}

Layout moved_layout(const Config& c, const Layout& base, int nproc) {
  MF_CHECK(nproc >= 1, "launch: the number of processes must be at least 1, got ", nproc);
  const size_t e = global::elastic_dim();
  const std::string_view elastic = global::dim_specs()[e].key_name();
  global::ParallelDims kept = base.dims;
  kept.set(kept.name(e), 1);
  const int64_t model_ranks = kept.product();
  std::string kept_str;  // "tensor_parallel_size 2" (the kept sizes above 1)
  for (size_t i = 0; i < kept.count(); ++i) {
    if (i == e || kept.size(i) == 1) continue;
    kept_str += detail::cat(kept_str.empty() ? "" : " x ", global::dim_specs()[i].key_name(), " ", kept.size(i));
  }
  MF_CHECK(nproc % model_ranks == 0, "launch: ", nproc, " processes cannot hold ", kept_str,
           " (kept on a restart): use a multiple of ", model_ranks);
  Layout l = base;
  l.nproc = nproc;
  l.dims.set(l.dims.name(e), nproc / model_ranks);
  const int64_t global = base.global_batch(), per_step = base.micro_batch * l.dims.batch_ranks();
  MF_CHECK(global % per_step == 0, "launch: on ", nproc, " processes (", elastic, " ", l.dims.size(e),
           ") the global batch ", global, " is not a multiple of train_micro_batch_size ", base.micro_batch, " x ",
           l.dims.batch_ranks(), ", so it cannot be kept by accumulation");
  l.accumulation = global / per_step;
  Config moved = c;
  for (const std::string& kv : layout_overrides(l)) moved.apply_override(kv);
  try {
    (void)runtime::train_options(moved, nproc);  // e.g. interleaved pipelines' micro-batch counts
  } catch (const Error& refused) {
    throw Error(detail::cat("launch: the run on ", nproc, " processes (", elastic, " ", l.dims.size(e),
                            ", num_accumulation_steps ", l.accumulation, ") is refused: ", refused.what()));
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
