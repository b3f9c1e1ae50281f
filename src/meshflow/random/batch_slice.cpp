#include "meshflow/random/batch_slice.h"

#include "meshflow/core/error.h"

namespace mf {

namespace {
thread_local BatchSlice g_slice;
}

const BatchSlice& current_batch_slice() { return g_slice; }

LogicalSlice batch_logical_slice(const Shape& local_shape, const char* op) {
  if (!g_slice.active()) return {};
  MF_CHECK(!local_shape.empty() && g_slice.start + local_shape[0] <= g_slice.logical_rows, op, ": a piece ",
           shape_str(local_shape), " starting at batch row ", g_slice.start, " does not fit in the logical batch of ",
           g_slice.logical_rows, " rows");
  LogicalSlice s;
  s.logical_shape = local_shape;
  s.logical_shape[0] = g_slice.logical_rows;
  s.start.assign(local_shape.size(), 0);
  s.start[0] = g_slice.start;
  return s;
}

BatchSliceGuard::BatchSliceGuard(int64_t start, int64_t logical_rows) : saved_(g_slice) {
  MF_CHECK(start >= 0 && start < logical_rows, "BatchSliceGuard: start ", start, " must be in [0, logical_rows = ",
           logical_rows, ")");
  g_slice = BatchSlice{start, logical_rows};
}

BatchSliceGuard::BatchSliceGuard(const BatchSlice& slice) : saved_(g_slice) {
  MF_CHECK(!slice.active() || (slice.start >= 0 && slice.start < slice.logical_rows), "BatchSliceGuard: start ",
           slice.start, " must be in [0, logical_rows = ", slice.logical_rows, ")");
  g_slice = slice;
}

BatchSliceGuard::~BatchSliceGuard() { g_slice = saved_; }

}  // namespace mf
