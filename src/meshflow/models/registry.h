// The model zoo: one ModelSpec per `model.name`, each model in its own folder (models/<name>/).
// Adding a model is its folder plus one line in registry.cpp; the trainer, checkpoints,
// `model.pretrained` and `meshflow convert` use only the spec and the Model interface.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/io/hf_files.h"
#include "meshflow/models/model.h"

namespace mf::models {

// A model's Hugging Face mapping. config.json <-> its model.* keys; the safetensors tensors
// under its parameter names (as stored: checks and renames only, dtypes kept).
struct HfMapping {
  std::string model_type;    // config.json "model_type", e.g. "gpt2"
  std::string architecture;  // what --to-hf writes as "architectures", e.g. "GPT2LMHeadModel"
  // config.json -> a Config with its model.* keys (model.name set); throws naming the file and
  // the key for a model this one does not compute the same way.
  std::function<Config(const std::string& config_json_path)> read_config;
  // The model.* keys of `c` -> config.json text, torch_dtype `dtype`.
  std::function<std::string(const Config& c, DType dtype)> write_config;
  // The weight files' tensors under the model's parameter names (buffers dropped, tied copies
  // checked and dropped); throws naming the file for a tensor that is not the model's.
  std::function<nn::NamedTensors(const io::HfModelFiles&)> read_tensors;
  // config.json's names of model.* keys, for messages ({"model.num_attention_heads", "n_head"}).
  std::vector<std::pair<std::string, std::string>> key_names;
  // The model's tensors under the names a Hugging Face loader reads (identity if null).
  std::function<nn::NamedTensors(const nn::NamedTensors&)> write_tensors;
};

// What one of the model's layers keeps for backward, in elements per token (the auto-parallel
// planner's memory model, plan/memory.h), by how tensor parallelism splits it.
struct LayerActivations {
  double sequence = 0;  // the residual stream's tensors: split over tp only with sequence parallelism
  double gathered = 0;  // the inputs of column-split GEMMs: whole on every tp rank (gathered under sp)
  double split = 0;     // inside the split region (q, k, v, attention output, MLP hidden states): / tp
  double core = 0;      // of `split`, what selective recomputation does not keep (the attention core's own)
  // What the layer's backward holds beyond what it keeps, at its peak: an eager attention's score
  // gradients (T5's: two at once, the softmax's beside its input's, less the dropout's output,
  // released by then).
  double score_work = 0;
  // Bytes a micro-batch makes whatever its rows: an additive bias on the attention scores (T5's
  // relative position bias, heads x Tq x Tk, whole on every rank; its gradient made in backward)
  // and the bucket ids it is looked up from (kept for the table's gradient).
  double bias_bytes = 0, bias_ids_bytes = 0;
  // What full recomputation keeps of the layer, its input, per token, whole on every tp rank,
  // where that is not the residual stream (0: the hidden size, split with sequence parallelism):
  // T5's joined encoder-and-decoder stream.
  double whole_input = 0;
};

struct ModelSpec {
  std::string name;  // model.name
  // (run config, tokenizer vocabulary size, parallel context) -> the model of this rank,
  // initialised from train.seed. The model's config section is model.*; training_settings(c)
  // gives its dtype and recomputation.
  std::function<std::shared_ptr<Model>(const Config&, int64_t, const ModelContext&)> build;
  // The model.* keys that describe its structure: a converted checkpoint's config.yaml holds them,
  // and weights that come with a config must agree with the run's on those the tensors' shapes do
  // not show (e.g. the number of attention heads).
  std::vector<std::string> config_keys;
  // The model's structure table: every model.* key that changes what the weights compute and that
  // their shapes do not show (heads, norm epsilon, rotary base and scaling, ...). model.pretrained
  // takes these from the weights' config where the run's does not set them, and refuses a
  // different value it sets (runtime::with_pretrained_structure).
  std::vector<std::string> structure_keys;
  // Whether a structure key holds for weights of config `weights` (null: every key): Llama's
  // rope_scaling.factor means nothing without rope_scaling.type llama3.
  std::function<bool(const Config& weights, const std::string& key)> structure_key_applies;
  // Parameter-name prefixes of task heads (BERT's pooler, masked-LM and classifier heads): weights
  // loaded into a model with another head (model.pretrained of a pretrained encoder into a
  // classifier) drop the heads the model has not, and the model's head parameters they lack, or
  // hold with another shape (another number of labels), keep their initialisation, as Hugging
  // Face's from_pretrained does.
  std::vector<std::string> head_prefixes;
  // The layers a pipeline places over its stages for the model.* keys of `c` (null:
  // model.num_layers; T5: its encoder's and decoder's blocks).
  std::function<int64_t(const Config& c)> num_layers;
  // The length of its activations' sequence for the model.* keys of `c` (null: data.seq_length, 0 =
  // model.max_seq_length; ViT: its patches and class token).
  std::function<int64_t(const Config& c)> sequence_length;
  // What layer `layer` (a whole-model index) keeps for backward per token of the run's sequence
  // of `seq_len` tokens (runtime::sequence_length) for the model.* keys of `c` (the planner
  // refuses a model without it). Every layer alike but T5's: its encoder and decoder blocks.
  std::function<LayerActivations(const Config& c, int64_t layer, int64_t seq_len)> layer_activations;
  // The share of a micro-batch's tokens (sequences of `seq_len`) whose logits the loss head
  // computes, for the run config `c` (null: every token; BERT's masked LM: data.masked_lm_prob,
  // the positions it predicts; its classifier: one per sequence).
  std::function<double(const Config& c, int64_t seq_len)> head_token_share;
  // One line for messages: "GPT-2: layers 4, hidden 32, ..." (Model::describe()).
  std::function<std::string(const Config& c)> describe;
  // A checkpoint's model.* keys: those of the run's config.yaml (`run`) where there is one, with
  // the sizes the tensors show where they may differ (a vocabulary padded for the tokenizer);
  // without one (`run` null), the sizes the tensors show, or a throw naming `source` when they do
  // not show enough.
  std::function<Config(const nn::NamedTensors& tensors, const Config* run, const std::string& source)> checkpoint_config;
  // Weights made for other sizes the model can take, made to fit (ViT: position embeddings of
  // another image size, interpolated); returns a note of what changed ("" when nothing did). Null:
  // none. `model` holds the model's model.* keys.
  std::function<std::string(const Config& model, nn::NamedTensors& tensors)> adapt_weights;
  // Hugging Face interop; model_type empty: none.
  HfMapping hf;
};

// The registered models; get() throws "unknown model.name `x` (registered: a, b)".
const ModelSpec& model_spec(const std::string& name);
std::vector<std::string> model_names();
// The spec whose Hugging Face model_type is `type`, or null.
const ModelSpec* model_spec_for_hf_type(const std::string& type);
// The layers of the model.* keys of `c` (ModelSpec::num_layers).
int64_t model_layers(const Config& c);
// Throws for a model.* key `c` sets (to other than its default) that model.name's model does not
// read (ModelSpec::config_keys), naming the models that do: a model's keys are valid only when
// that model is chosen. build_model() checks it.
void check_model_keys(const Config& c);
// The whole model's parameters for the model.* keys of `c`: names and logical shapes, in model
// order — Model::parameter_shapes() of the model those keys build, built shape-only (nothing is
// allocated: a plan or a weight check of a 1T-parameter model costs no memory).
std::vector<std::pair<std::string, Shape>> parameter_shapes(const Config& c);
// model_spec(c.get_string("model.name")).build(c, tokenizer_vocab_size, ctx).
std::shared_ptr<Model> build_model(const Config& c, int64_t tokenizer_vocab_size, const ModelContext& ctx = {});

}  // namespace mf::models
