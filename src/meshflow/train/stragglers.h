// Straggler detection over the per-rank figures a logged step gathers (gather_rank_stats, step_stats.h):
// a rank whose compute time — its step time less its time blocked in communication, per step over
// the log period — exceeds the median rank's by train.straggler_factor is a straggler. Waiting ranks are not: in synchronous
// training every rank's step takes as long as the slowest one's, the others' extra is waiting.
#pragma once
#include <vector>

#include "meshflow/train/trainer.h"

namespace mf::train {

struct Straggler {
  int rank = 0;
  double compute_s = 0, median_compute_s = 0;
  double ratio = 0;  // compute_s / median_compute_s
};

// The stragglers among `ranks`, slowest first; none when factor is 0 or there are fewer than 2 ranks.
std::vector<Straggler> find_stragglers(const std::vector<RankStepStats>& ranks, double factor);

}  // namespace mf::train
