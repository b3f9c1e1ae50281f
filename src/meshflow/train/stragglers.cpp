#include "meshflow/train/stragglers.h"

#include <algorithm>

namespace mf::train {

std::vector<Straggler> find_stragglers(const std::vector<RankStepStats>& ranks, double factor) {
  std::vector<Straggler> out;
  if (factor <= 0 || ranks.size() < 2) return out;
  std::vector<double> compute;
  for (const RankStepStats& r : ranks) compute.push_back(std::max(0.0, r.mean_compute_s()));
  std::vector<double> sorted = compute;
  const size_t n = sorted.size();
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n / 2), sorted.end());
  double median = sorted[n / 2];
  if (n % 2 == 0) {  // the mean of the two middle values
    const double upper = median;
    median = (*std::max_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n / 2)) + upper) / 2;
  }
  if (median <= 1e-6) return out;  // nothing computed: no ratio to speak of
  for (size_t i = 0; i < n; ++i)
    if (compute[i] > factor * median) out.push_back({ranks[i].rank, compute[i], median, compute[i] / median});
  std::sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) { return a.ratio > b.ratio; });
  return out;
}

}  // namespace mf::train
