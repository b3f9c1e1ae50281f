#include "meshflow/train/data_recipe.h"

#include <mutex>

#include "meshflow/train/bert_batches.h"
#include "meshflow/train/gpt_batches.h"
#include "meshflow/train/image_batches.h"
#include "meshflow/train/t5_batches.h"

namespace mf::train {

DataRecipeRegistry& data_recipe_registry() {
  static DataRecipeRegistry r("the model's task");
  static std::once_flag once;
  std::call_once(once, [] {
    r.add("causal_lm", causal_lm_data);
    r.add("masked_lm", masked_lm_data);
    r.add("sequence_classification", sequence_classification_data);
    r.add("span_corruption", span_corruption_data);
    r.add("image_classification", image_classification_data);
  });
  return r;
}

std::string task_name(models::BatchKind kind) {
  switch (kind) {
    case models::BatchKind::kCausalLM: return "causal_lm";
    case models::BatchKind::kMaskedLM: return "masked_lm";
    case models::BatchKind::kSequenceClassification: return "sequence_classification";
    case models::BatchKind::kSpanCorruption: return "span_corruption";
    case models::BatchKind::kImageClassification: return "image_classification";
  }
  MF_THROW("unknown batch kind ", static_cast<int>(kind));
}

RunSources make_sources(const RecipeInputs& in) {
  return data_recipe_registry().create(task_name(in.model.batch_kind()), in);
}

SplitData open_split_data(const Config& c, bool by_document) {
  SplitData d;
  const std::string prefix = c.get_string("data.data_prefix");
  MF_CHECK(!prefix.empty(), "data.data_prefix is empty: point it at a dataset made by `meshflow preprocess` "
           "(<prefix>.bin and <prefix>.idx)");
  d.indexed = std::make_unique<IndexedDataset>(prefix);
  auto ranges = split_documents(c.get_string("data.splits"),
                                by_document ? d.indexed->num_documents() : d.indexed->num_sequences());
  d.train_range = ranges[0];
  d.valid_range = ranges[1];
  MF_CHECK(d.train_range.size() > 0, "data.splits '", c.get_string("data.splits"), "' leaves no training documents");
  return d;
}

void check_validation_range(const Config& c, const SplitData& d) {
  MF_CHECK(d.valid_range.size() > 0, "data.splits '", c.get_string("data.splits"),
           "' leaves no validation documents; change it or set train.evaluation.enabled=false");
}

}  // namespace mf::train
