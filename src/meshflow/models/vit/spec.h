// The Vision Transformer's zoo entry: model.name vit (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::vit {

ModelSpec vit_spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf();

}  // namespace mf::models::vit
