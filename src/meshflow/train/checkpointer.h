// A run's checkpoints: saving everything a resume needs (every rank's state slots, the iteration,
// the optimizer's step count, the data position, the generator, the loss scaler, the layout) and
// restoring it from the latest checkpoint, with the checks that the checkpoint is this run's.
// The trainer's state is given explicitly (TrainingStateRefs), so the checkpointer sees what it
// saves and restores, and nothing else.
#pragma once
#include <cstdint>

#include "meshflow/models/model.h"
#include "meshflow/optim/loss_scaler.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/parallel/grad_sync.h"
#include "meshflow/parallel/groups.h"
#include "meshflow/runtime/options.h"

namespace mf::train {

class BatchSource;

// What a checkpoint holds of a trainer, by reference: saving reads it, resuming sets it.
struct TrainingStateRefs {
  const runtime::TrainOptions& opts;
  const parallel::NamedGroups& groups;
  models::Model& model;
  parallel::GradSync& sync;
  optim::Optimizer& optimizer;
  BatchSource& train_data;
  optim::LossScaler& scaler;
  int64_t& iter;
  int64_t& skipped_iters;
  int64_t global_batch_size;  // samples of one optimizer step over all data-parallel ranks
};

// <output_dir>/checkpoints/iter_XXXXXXX, then `latest`. Collective over groups.everyone(): every
// rank writes its own pieces, in parallel.
void save_checkpoint(const TrainingStateRefs& run);
// Restores the latest checkpoint of <output_dir>; false when there is none (the generator is then
// seeded with train.seed). Throws when it is damaged (naming the complete one before it), of
// another model, of another run's data (sequence length, global batch, seed), or past
// train.train_iter.
bool load_latest_checkpoint(const TrainingStateRefs& run);
// Where train() starts: with train.resume, load_latest_checkpoint (none: the main rank says on one
// line that training starts from step 0); otherwise the generator seeded with train.seed.
void resume_or_seed(const TrainingStateRefs& run);
// A stop signal's checkpoint (`signal` stopped the run after step run.iter): saves it, then the
// main rank says so on one line.
void save_at_stop(const TrainingStateRefs& run, int signal);

}  // namespace mf::train
