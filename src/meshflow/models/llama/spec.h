// The Llama family's entries in the model zoo (models/registry.h): model.name llama, qwen2 and
// mistral, one model (models/llama/model.h) whose Hugging Face class follows the name.
#pragma once
#include "meshflow/models/llama/config.h"
#include "meshflow/models/registry.h"

namespace mf::models::llama {

ModelSpec llama_spec();
ModelSpec qwen2_spec();
ModelSpec mistral_spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf(LlamaVariant variant);

}  // namespace mf::models::llama
