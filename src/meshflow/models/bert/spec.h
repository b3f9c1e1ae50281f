// The BERT family's zoo entries: model.name bert and roberta (models/registry.h).
#pragma once
#include "meshflow/models/bert/config.h"
#include "meshflow/models/registry.h"

namespace mf::models::bert {

ModelSpec bert_spec();
ModelSpec roberta_spec();

// Its Hugging Face mapping (hf.cpp): config.json and the weight files <-> its model.* keys and parameters.
HfMapping hf(BertVariant variant);

}  // namespace mf::models::bert
