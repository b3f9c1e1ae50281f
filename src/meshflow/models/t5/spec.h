// T5's zoo entries: model.name t5 and mt5 (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::t5 {

ModelSpec t5_spec();
ModelSpec mt5_spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf(bool mt5);

}  // namespace mf::models::t5
