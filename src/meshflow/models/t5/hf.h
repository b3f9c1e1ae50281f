// Hugging Face T5 and mT5 files (T5ForConditionalGeneration, MT5ForConditionalGeneration):
// config.json <-> meshflow's T5 sizes and options, and the weight files' tensors under meshflow's
// parameter names (which are Hugging Face's: a plain mapping; the encoder's and decoder's
// embed_tokens, and a tied lm_head, checked equal to shared.weight and dropped).
#pragma once
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/t5/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> sizes and options. Throws naming the file and the key for what meshflow's T5
// does not compute the same way (a feed_forward_proj other than relu or gated-gelu).
T5Config t5_config_from_hf(const std::string& config_json_path);
// config.json text for these sizes and options (model_type t5, or mt5), torch_dtype `dtype`.
std::string t5_config_to_hf(const T5Config& c, DType dtype);
// The weight files' tensors under the model's parameter names of `c`; dtypes kept.
nn::NamedTensors read_hf_t5_tensors(const io::HfModelFiles& files, const T5Config& c);

}  // namespace mf::models
