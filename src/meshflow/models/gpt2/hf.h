// Hugging Face GPT-2 files (GPT2LMHeadModel / GPT2Model): config.json <-> meshflow's GPT-2
// sizes, and the tensors of model.safetensors under meshflow's parameter names.
//
// meshflow names its parameters as GPT2LMHeadModel does ("transformer.h.0.attn.c_attn.weight",
// Conv1D weights (in, out)), so the mapping is about the edges: files saved from GPT2Model (the
// original `gpt2` repository) have no "transformer." prefix, may hold the attention mask buffers
// "h.N.attn.bias" / "h.N.attn.masked_bias", and may hold "lm_head.weight", which GPT-2 ties to
// the token embedding.
#pragma once
#include <string>
#include <vector>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/gpt2/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> model sizes; absent keys take GPT2Config's defaults (n_positions 1024, ...).
// Throws naming the file and the key for a model that meshflow's GPT-2 does not compute the same
// way (another model_type or activation, unscaled attention, an untied head, cross-attention).
Gpt2Config gpt2_config_from_hf(const std::string& config_json_path);
// config.json text of a GPT2LMHeadModel of these sizes, torch_dtype `dtype`.
std::string gpt2_config_to_hf(const Gpt2Config& c, DType dtype);

// The tensors of the weight files under meshflow's names, in file order: "transformer." added
// where missing; the mask buffers dropped; lm_head.weight checked equal (bit for bit) to the
// token embedding and dropped. Dtypes are kept. Throws naming the file for a tensor that is not
// a GPT-2 parameter or buffer, and for an lm_head.weight that differs from the embedding.
nn::NamedTensors read_hf_gpt2_tensors(const io::HfModelFiles& files);

// A GPT-2 parameter name for some layer count ("transformer.h.<N>.<block parameter>", the
// embeddings, ln_f).
bool is_gpt2_parameter_name(const std::string& name);

}  // namespace mf::models
