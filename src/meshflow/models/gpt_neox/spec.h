// GPT-NeoX's entry in the model zoo (models/registry.h): model.name gpt_neox.
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::gpt_neox {

ModelSpec spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf();

}  // namespace mf::models::gpt_neox
