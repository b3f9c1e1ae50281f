// GPT-NeoX's entry in the model zoo (models/registry.h): model.name gpt_neox.
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::gpt_neox {

ModelSpec spec();

}  // namespace mf::models::gpt_neox
