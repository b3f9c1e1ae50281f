// The MLP language model's entry in the model zoo (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::mlp_lm {

ModelSpec spec();

}  // namespace mf::models::mlp_lm
