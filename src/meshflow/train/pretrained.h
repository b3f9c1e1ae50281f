// Model weights from outside a run: `model.pretrained` and `meshflow convert`.
//
// Two kinds of source, found by what `path` holds:
//  - a Hugging Face model of a registered model_type (models/registry.h): a folder with
//    config.json and model.safetensors (or sharded, with model.safetensors.index.json), or the
//    .safetensors file with config.json beside it;
//  - a meshflow checkpoint: a run's (or `meshflow convert`'s) output folder — its
//    checkpoints/latest — or one checkpoints/iter_N folder (or a shard file in it); the model
//    (model.name) and what the tensors do not show come from the run's config.yaml when it is
//    there.
// Either way the tensors are the whole model in the unsplit (Hugging Face) layout, so any
// tensor/pipeline layout loads them: each rank takes its stage's tensors by name and slices
// its tensor-parallel pieces.
#pragma once
#include <string>

#include "meshflow/config/config.h"
#include "meshflow/models/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/nn/module.h"

namespace mf::train {

struct ModelWeights {
  std::string source;         // the file read (for messages)
  bool hugging_face = false;
  const models::ModelSpec* spec = nullptr;  // the model they are weights of
  nn::NamedTensors tensors;   // the whole model, its parameter names, model order, dtypes as stored
  Config config;              // its model.* keys (the sizes the tensors show where there is no config)
  bool has_config = false;    // given by a config.json / config.yaml (else only the sizes the tensors show)
  std::string config_source;  // that file
};

// Reads and checks the weights at `path` (every tensor of the model its config describes, with
// that config's shapes); errors name the file and the tensor. A checkpoint without config.yaml is
// taken as weights of `expected_model` (model.name; "": the default model).
ModelWeights read_model_weights(const std::string& path, const std::string& expected_model = "");

// Copies `w` into this rank's model — its pipeline stage's tensors, sliced to its tensor-parallel
// pieces — casting to the model's dtype where the stored one differs (a bf16 file into an f32
// model). Every tensor must have the shape the model's config gives (else an error naming the
// tensor, its shape and the expected one), and a config that came with the weights must give the
// model's number of heads. Local: no communication. Returns a one-line description
// ("148 tensors from X (Hugging Face, bf16 cast to f32)").
// new_heads (`model.pretrained`): task heads (ModelSpec::head_prefixes) the weights do not give, or
// give with another shape, keep the model's initialisation and the weights' other heads are
// dropped (the description names the new tensors); otherwise every parameter must be given.
std::string load_model_weights(models::Model& m, const ModelWeights& w, bool new_heads = false);

// `meshflow convert --from-hf`: a Hugging Face model into a weights-only meshflow checkpoint
// in `out_dir`: config.yaml with the model sizes, then checkpoints/iter_0000000 (the model
// tensors whole, dtypes kept bit for bit, no optimizer state; metadata.json holding the same
// config) and checkpoints/latest. Refuses an `out_dir` that already holds a run or checkpoint.
// Returns a one-line summary.
std::string convert_from_hf(const std::string& hf_path, const std::string& out_dir);
// `meshflow convert --to-hf`: a meshflow checkpoint (run folder, convert output or iter_N
// folder; needs the run's config.yaml) of a model with a Hugging Face mapping into
// `out_dir`/model.safetensors (HF names, the stored dtypes, metadata format "pt"; GPT-2: no
// lm_head, tied) and config.json (GPT2LMHeadModel), each written atomically. Returns a one-line summary.
std::string convert_to_hf(const std::string& checkpoint_path, const std::string& out_dir);

}  // namespace mf::train
