// GPT-2's entry in the model zoo (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::gpt2 {

ModelSpec spec();

}  // namespace mf::models::gpt2
