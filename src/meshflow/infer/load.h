// A model ready to generate, from a resolved Config: the tokenizer (tokenization.*), the model
// built for this rank's place in the layout (train.dist.tensor_parallel_size and
// pipeline_parallel_size; data parallelism must be 1), its weights from model.pretrained (a
// Hugging Face folder or a meshflow checkpoint) or, when that is empty, the latest checkpoint in
// train.output_dir, and the engine over the run's groups. What `meshflow generate` and
// `meshflow serve` start from.
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/config/config.h"
#include "meshflow/data/tokenizer.h"
#include "meshflow/infer/engine.h"

namespace mf::infer {

struct LoadedModel {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<Tokenizer> tokenizer;
  std::string description;  // one line: the model and where its weights came from
  bool main_rank = true;    // world rank 0: the one that prints and serves
};

// Collective over `world` (null: this process alone): every rank calls it with the same config.
LoadedModel load_for_inference(const Config& c, const comm::CommPtr& world = nullptr);

}  // namespace mf::infer
