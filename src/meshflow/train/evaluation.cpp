#include "meshflow/train/evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "meshflow/train/trainer.h"

namespace mf::train {

EvalStats evaluate_batches(models::Model& model, PipelineExecutor& executor,
                           const std::function<std::unique_ptr<BatchSource>()>& make_data, int64_t batches,
                           int64_t micro_batch, const parallel::NamedGroups& groups) {
  model.eval();
  std::unique_ptr<BatchSource> data = make_data();
  double total = 0.0;
  const std::vector<std::string> names = model.eval_metric_names();
  std::vector<double> sums(2 * names.size(), 0.0);  // (sum, count) of each metric
  for (int64_t i = 0; i < batches; ++i) {
    const PipelineExecutor::Evaluation ev = executor.evaluate(data->next(micro_batch));
    total += ev.loss;
    for (size_t k = 0; k < names.size() && k < ev.metrics.size(); ++k) {
      sums[2 * k] += ev.metrics[k].first;
      sums[2 * k + 1] += ev.metrics[k].second;
    }
  }
  model.train();
  EvalStats e;
  const double mean = parallel::sum_over(groups.get("pp"), total) / static_cast<double>(std::max<int64_t>(1, batches));
  e.loss = parallel::mean_over(groups.get("dp"), mean);
  e.perplexity = model.batch_kind() == models::BatchKind::kCausalLM ? std::exp(e.loss)
                                                                   : std::numeric_limits<double>::quiet_NaN();
  if (!names.empty()) {
    sums = parallel::sum_over(groups.get("dp"), parallel::sum_over(groups.get("pp"), sums));
    for (size_t k = 0; k < names.size(); ++k) e.metrics.emplace_back(names[k], sums[2 * k] / std::max(1.0, sums[2 * k + 1]));
  }
  return e;
}

}  // namespace mf::train
