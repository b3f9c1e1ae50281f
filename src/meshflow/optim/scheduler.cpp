#include "meshflow/optim/scheduler.h"

#include <algorithm>
#include <cmath>

#include "meshflow/core/error.h"

namespace mf::optim {

LrScheduler::LrScheduler(SchedulerConfig c) : c_(std::move(c)) {
  MF_CHECK(c_.name == "cosine" || c_.name == "linear" || c_.name == "constant" || c_.name == "multistep",
           "train.scheduler.name: unknown schedule '", c_.name, "' (expected cosine, linear, constant or multistep)");
  MF_CHECK(c_.warmup_iters >= 0, "train.scheduler.warmup_iter must be >= 0, got ", c_.warmup_iters);
  MF_CHECK(std::is_sorted(c_.milestones.begin(), c_.milestones.end()), "train.scheduler.milestones must be increasing");
}

double LrScheduler::lr_at(int64_t step) const {
  double warm = 1.0;
  if (step < c_.warmup_iters) {
    double f = static_cast<double>(step) / static_cast<double>(c_.warmup_iters);
    warm = c_.warmup_factor * (1.0 - f) + f;
  }
  double decay = 1.0;
  double span = static_cast<double>(std::max<int64_t>(1, c_.total_iters - c_.warmup_iters));
  double t = std::clamp(static_cast<double>(step - c_.warmup_iters) / span, 0.0, 1.0);
  if (c_.name == "cosine") {
    decay = step < c_.warmup_iters ? 1.0 : c_.alpha + (1.0 - c_.alpha) * 0.5 * (1.0 + std::cos(M_PI * t));
  } else if (c_.name == "linear") {
    decay = step < c_.warmup_iters ? 1.0 : 1.0 - (1.0 - c_.alpha) * t;
  } else if (c_.name == "multistep") {
    auto passed = std::upper_bound(c_.milestones.begin(), c_.milestones.end(), step) - c_.milestones.begin();
    decay = std::pow(c_.gamma, static_cast<double>(passed));
  }
  return c_.base_lr * warm * decay;
}

}  // namespace mf::optim
