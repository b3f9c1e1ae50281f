// The layout of a supervised job on a given number of processes (`meshflow launch`): a restart
// on fewer ranks keeps the sizes of the parallel dimensions that are not elastic (tensor,
// pipeline: global/parallel_dims.h), the micro-batch and the global batch, shrinks the elastic one
// (data parallelism) and raises the accumulation steps to match. The sampler's
// position counts the samples of all ranks and a sample's dropout depends only on its place in the
// global batch, so such a restart trains on the same batches with the same random numbers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/global/parallel_dims.h"

namespace mf::launch {

struct Layout {
  int nproc = 1;
  global::ParallelDims dims;  // resolved: their product is nproc
  int64_t micro_batch = 1, accumulation = 1;
  int64_t global_batch() const { return micro_batch * accumulation * dims.batch_ranks(); }
};

// The layout `c` gives on `nproc` processes, with the trainer's checks (runtime::train_options):
// throws mf::Error naming the keys when the config cannot run on that many.
Layout run_layout(const Config& c, int nproc);

// `base` (the job's first layout) moved to `nproc` processes: the sizes of the dimensions that
// are not elastic, the micro-batch and the global batch kept; the elastic one (dp) = nproc / the
// kept ones' product, accumulation = global batch / (micro-batch x the batch-splitting ranks).
// Throws mf::Error saying why when `nproc` cannot hold it (not a multiple of the kept sizes, or a
// global batch that dp x micro-batch does not divide), or when the trainer refuses the result.
Layout moved_layout(const Config& c, const Layout& base, int nproc);

// The key=value overrides that run `c` in layout `l` (the elastic dimension's size, accumulation
// steps and global batch spelled out).
std::vector<std::string> layout_overrides(const Layout& l);

// The largest count in [min_nproc, current) that holds `base` (moved_layout succeeds), or
// nullopt when there is none.
std::optional<int> next_smaller_nproc(const Config& c, const Layout& base, int current, int min_nproc);

}  // namespace mf::launch
