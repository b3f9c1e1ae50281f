// The logical batch the current computation is a slice of. Data parallelism splits a global
// micro-batch over ranks (S(0)); for the split run to reproduce the single-process run bit for
// bit, every random op must draw the numbers of its rows' positions in the *logical* batch.
// The trainer sets this for the forward and backward of each micro-batch; random ops whose
// input's axis 0 is the batch (dropout, attention dropout) then offset their Philox indices by
// the slice start, exactly as a LogicalSlice on axis 0 would. Thread-local; nests (the inner
// guard wins, the outer is restored).
#pragma once
#include <cstdint>

#include "meshflow/core/shape.h"

namespace mf {

struct BatchSlice {
  int64_t start = 0;         // first row of this piece in the logical batch
  int64_t logical_rows = 0;  // rows of the logical batch; 0: no slice (the piece is the batch)
  bool active() const { return logical_rows > 0; }
};

// The slice set by the innermost live BatchSliceGuard of this thread (inactive when none).
const BatchSlice& current_batch_slice();

// Where a local tensor of `local_shape` (axis 0 = batch) sits in the logical tensor under the
// current batch slice; whole (empty) when no slice is active. Throws naming `op` when the local
// rows do not fit in the logical batch.
LogicalSlice batch_logical_slice(const Shape& local_shape, const char* op);

class BatchSliceGuard {
 public:
  // Throws unless 0 <= start and start < logical_rows.
  BatchSliceGuard(int64_t start, int64_t logical_rows);
  // Installs `slice` as it is, inactive included: replays a slice captured earlier (recomputation
  // in backward must draw what the forward drew, whatever guard is live then).
  explicit BatchSliceGuard(const BatchSlice& slice);
  ~BatchSliceGuard();
  BatchSliceGuard(const BatchSliceGuard&) = delete;
  BatchSliceGuard& operator=(const BatchSliceGuard&) = delete;

 private:
  BatchSlice saved_;
};

}  // namespace mf
