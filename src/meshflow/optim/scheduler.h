// Learning-rate schedules with linear warmup, as LiBai offers them (WarmupCosineLR,
// WarmupPolynomialLR with power 1, WarmupMultiStepLR, constant). A pure function of the step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mf::optim {

struct SchedulerConfig {
  std::string name = "cosine";  // cosine | linear | constant | multistep
  double base_lr = 1e-4;
  int64_t total_iters = 1000;
  int64_t warmup_iters = 0;
  double warmup_factor = 0.0;  // lr multiplier at step 0, rising linearly to 1 at warmup_iters
  double alpha = 0.0;          // cosine / linear: final lr = alpha * base_lr
  std::vector<int64_t> milestones;
  double gamma = 0.1;
};

class LrScheduler {
 public:
  explicit LrScheduler(SchedulerConfig c);  // validates (throws naming the field)
  double lr_at(int64_t step) const;          // step counts from 0
 private:
  SchedulerConfig c_;
};

}  // namespace mf::optim
