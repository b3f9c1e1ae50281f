// From a resolved Config to the pieces of a run: trainer options, pipeline stages (the model is
// built from its section by models/registry.h). Checks the
// relations between keys (batch sizes, parallel sizes, sequence length) with messages that
// name the keys to fix.
#pragma once
#include "meshflow/config/config.h"
#include "meshflow/models/model.h"
#include "meshflow/runtime/options.h"

namespace mf::runtime {

// world_size: processes in the run; train.dist sizes must multiply to it (a 0 size is derived).
TrainOptions train_options(const Config& c, int world_size = 1);
// The layers of every (virtual) pipeline stage, virtual stage k·p + s being chunk k of rank s:
// train.dist.custom_pipeline_stage_id when given, else balanced by compute and memory —
// contiguous, at least one layer each, minimising the larger of a stage's compute and memory
// shares (the head's compute on the last stage, the embedding's weights on the first and last,
// 1F1B's p - s micro-batches of activations on stage s). Throws before any work for an
// impossible split.
std::vector<std::pair<int64_t, int64_t>> pipeline_layers(const Config& c, int64_t virtual_stages);
// Pipeline rank `rank` of `ranks`, each with `chunks` virtual stages (chunk k of rank s is virtual
// stage k * ranks + s): its layers as pipeline_layers() splits them. One rank: the whole model.
models::PipelineStage pipeline_stage(const Config& c, int64_t ranks, int64_t rank, int64_t chunks);
// data.seq_length, or model.max_seq_length when 0.
int64_t sequence_length(const Config& c);
// train.threads: > 0 sets this process's OpenMP thread count (omp_set_num_threads), 0 leaves
// OpenMP's default (OMP_NUM_THREADS); negative throws. Returns the count ops will now use.
int apply_thread_count(const Config& c);

// `c` with the layout of one process (tp, pp, virtual stages, stage ids, sequence parallelism and
// ZeRO off): what run_evaluation evaluates with, whatever layout trained the run, as a checkpoint
// reads into any.
Config one_process_config(const Config& c);

}  // namespace mf::runtime
