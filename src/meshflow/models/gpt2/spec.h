// GPT-2's entry in the model zoo (models/registry.h).
#pragma once
#include <string>

#include "meshflow/models/registry.h"

namespace mf::models::gpt2 {

ModelSpec spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf();
// A GPT-2 parameter name for some layer count ("transformer.h.<N>.<block parameter>", the
// embeddings, ln_f): what the weight files may hold.
bool is_parameter_name(const std::string& name);

}  // namespace mf::models::gpt2
