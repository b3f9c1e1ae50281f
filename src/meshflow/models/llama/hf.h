// Hugging Face Llama-family files (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM):
// config.json <-> meshflow's Llama sizes and options, and the weight files' tensors under
// meshflow's parameter names (which are Hugging Face's: a plain mapping; the rotary
// inv_freq buffers some files hold are dropped, a tied lm_head.weight is checked and dropped).
#pragma once
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/llama/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> sizes and options; absent keys take Hugging Face's defaults for the class.
// Throws naming the file and the key for what meshflow's Llama does not compute the same way (an
// activation other than silu, biases on o_proj or the MLP, another rope_scaling type, Qwen2's
// per-layer sliding windows).
LlamaConfig llama_config_from_hf(const std::string& config_json_path);
// config.json text for these sizes and options (model_type and architecture of the variant),
// torch_dtype `dtype`.
std::string llama_config_to_hf(const LlamaConfig& c, DType dtype);
// The weight files' tensors under the model's parameter names of `c`; dtypes kept.
nn::NamedTensors read_hf_llama_tensors(const io::HfModelFiles& files, const LlamaConfig& c);

}  // namespace mf::models
