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
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/models/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/nn/module.h"

namespace mf::runtime {

struct ModelWeights {
  std::string source;         // the file read (for messages)
  bool hugging_face = false;
  const models::ModelSpec* spec = nullptr;  // the model they are weights of
  nn::NamedTensors tensors;   // the whole model, its parameter names, model order, dtypes as stored
  Config config;              // its model.* keys (the sizes the tensors show where there is no config)
  bool has_config = false;    // given by a config.json / config.yaml (else only the sizes the tensors show)
  std::string config_source;  // that file
  // The Hugging Face config.json the weights came from (a run or conversion keeps it beside its
  // config.yaml as kHfConfigFile): `convert --to-hf` writes back the fields meshflow does not
  // compute (bos/eos ids, label names, ...). "" when there is none.
  std::string hf_config_json;
  // Hugging Face's image processor beside config.json (preprocessor_config.json) as data.* keys
  // (image_mean, image_std): with_pretrained_structure takes them as it takes the structure keys.
  std::vector<std::pair<std::string, std::string>> preprocessing;
  std::string preprocessing_source;  // that file
};

// The name of the Hugging Face config.json kept beside a run's (model.pretrained of a Hugging Face
// model) or a conversion's config.yaml.
inline constexpr const char* kHfConfigFile = "hf_config.json";

// Reads and checks the weights at `path` (every tensor of the model its config describes, with
// that config's shapes); errors name the file and the tensor. A checkpoint without config.yaml is
// taken as weights of `expected_model` (model.name; "": the default model).
ModelWeights read_model_weights(const std::string& path, const std::string& expected_model = "");

// read_model_weights without the tensors: the model and the config that come with the weights
// (config.json, or the run's config.yaml of a checkpoint), and the kept config.json.
ModelWeights read_weights_config(const std::string& path, const std::string& expected_model = "");

// The keys of spec.structure_keys that hold for weights of config `weights_config`
// (ModelSpec::structure_key_applies): what the weights fix and the run must agree on.
std::vector<std::string> structure_keys(const models::ModelSpec& spec, const Config& weights_config);

// The run config `c` with the model structure the weights `w` (read_weights_config) were made
// with, as Hugging Face's from_pretrained takes its config: each structure key (structure_keys)
// that `c` does not give (Config::is_given) takes the weights' value, and one that `c` gives with
// another value is an error naming the key, both values and the file. Weights of another model or
// without a config change nothing (load_model_weights names those). `note`: one line naming the
// keys taken ("" none).
Config with_pretrained_structure(const Config& c, const ModelWeights& w, std::string* note = nullptr);

// with_pretrained_structure for the weights model.pretrained names in `c` (`c` itself when it
// names none); errors start "model.pretrained: ". `hf_config_json`: the Hugging Face config.json
// the weights came from (ModelWeights::hf_config_json), for the run to keep.
Config pretrained_run_config(const Config& c, std::string* note = nullptr, std::string* hf_config_json = nullptr);

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
// config) and checkpoints/latest, with the source's config.json kept as hf_config.json. Refuses an `out_dir` that already holds a run or checkpoint.
// Returns a one-line summary.
std::string convert_from_hf(const std::string& hf_path, const std::string& out_dir);
// `meshflow convert --to-hf`: a meshflow checkpoint (run folder, convert output or iter_N
// folder; needs the run's config.yaml) of a model with a Hugging Face mapping into
// `out_dir`/model.safetensors (HF names, the stored dtypes, metadata format "pt"; GPT-2: no
// lm_head, tied) and config.json (GPT2LMHeadModel), each written atomically. config.json also
// carries the fields of the Hugging Face config.json the weights came from (kHfConfigFile beside
// config.yaml: a conversion's, or a run's from model.pretrained) that meshflow does not compute:
// bos/eos token ids, other fields it does not write (Qwen2's window fields), and label names where
// the classes are as many. Returns a one-line summary.
std::string convert_to_hf(const std::string& checkpoint_path, const std::string& out_dir);

}  // namespace mf::runtime
