// The BERT family's zoo entries: model.name bert and roberta (models/registry.h).
#pragma once
#include "meshflow/models/registry.h"

namespace mf::models::bert {

ModelSpec bert_spec();
ModelSpec roberta_spec();

}  // namespace mf::models::bert
