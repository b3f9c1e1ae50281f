// Single-process training checkpoints: <output_dir>/checkpoints/iter_0000100/ holding
// model.safetensors, optimizer.safetensors and state.json (iteration, optimizer steps, data
// position, RNG state). Written into a temporary directory, fsynced and renamed into place;
// then `checkpoints/latest` names it (atomically). Older ones beyond max_to_keep are pruned.
#pragma once
#include <optional>
#include <string>

#include "meshflow/nn/module.h"
#include "meshflow/random/generator.h"

namespace mf::train {

struct TrainingState {
  int64_t iter = 0;
  int64_t optimizer_steps = 0;
  uint64_t data_position = 0;
  GeneratorState rng;
};

void write_checkpoint(const std::string& output_dir, const TrainingState& state, const nn::NamedTensors& model,
                      const nn::NamedTensors& optimizer, int64_t max_to_keep);

struct LoadedCheckpoint {
  std::string dir;
  TrainingState state;
  nn::NamedTensors model, optimizer;
};
// The checkpoint `latest` points to, or nullopt when there is none; errors name the file.
std::optional<LoadedCheckpoint> read_latest_checkpoint(const std::string& output_dir);
// The folder `latest` points to (checked to exist), or nullopt when there is none.
std::optional<std::string> latest_checkpoint_dir(const std::string& output_dir);

}  // namespace mf::train
