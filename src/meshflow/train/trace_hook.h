// train.profile as a trainer hook: records steps [start_step, start_step + num_steps) of every
// rank (core/trace.h: ops, backward ops, collectives from issue to completion and the waits for
// them, the pipeline's forward/backward of each micro-batch and its waits, gradient reduction,
// optimizer, evaluation and checkpoint phases, allocated memory) and writes
//   <output_dir>/trace/rank_NNNNN.json   each rank's own trace (Chrome trace-event JSON)
//   <output_dir>/trace.json              all ranks merged by rank 0, one process track per rank
// The merged file's "otherData" names the layout and schedule (pipeline_schedule,
// pipeline_stages, micro_batches, virtual_stages, world_size, dp, tp, pp, start_step, num_steps).
// Recording starts right after a barrier over every rank, so the ranks' clocks share their zero.
#pragma once
#include "meshflow/train/trainer.h"

namespace mf::train {

class TraceHook : public HookBase {
 public:
  void before_step(Trainer& t) override;
  void after_train(Trainer& t) override;

 private:
  void finish(Trainer& t);
  bool recording_ = false, done_ = false;
  int64_t first_step_ = 0;
};

}  // namespace mf::train
