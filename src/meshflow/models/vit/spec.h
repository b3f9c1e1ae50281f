// The Vision Transformer's zoo entry: model.name vit (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::vit {

ModelSpec vit_spec();

}  // namespace mf::models::vit
