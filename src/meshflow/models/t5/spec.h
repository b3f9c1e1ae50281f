// T5's zoo entries: model.name t5 and mt5 (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::t5 {

ModelSpec t5_spec();
ModelSpec mt5_spec();

}  // namespace mf::models::t5
