// Hugging Face GPT-NeoX files (GPTNeoXForCausalLM): config.json <-> meshflow's GPT-NeoX sizes
// and options, and the weight files' tensors under meshflow's parameter names (which are Hugging
// Face's: a plain mapping; the attention's mask and rotary buffers some files hold are dropped).
#pragma once
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/gpt_neox/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> sizes and options; absent keys take Hugging Face's defaults. Throws naming the
// file and the key for what meshflow's GPT-NeoX does not compute the same way (an activation
// other than gelu, attention_bias false, rope_scaling).
GptNeoxConfig gpt_neox_config_from_hf(const std::string& config_json_path);
// config.json text for these sizes and options, torch_dtype `dtype`.
std::string gpt_neox_config_to_hf(const GptNeoxConfig& c, DType dtype);
// The weight files' tensors under the model's parameter names of `c`; dtypes kept.
nn::NamedTensors read_hf_gpt_neox_tensors(const io::HfModelFiles& files, const GptNeoxConfig& c);

}  // namespace mf::models
