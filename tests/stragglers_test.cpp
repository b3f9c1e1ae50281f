// train/stragglers.h: a rank named when its compute time (step less communication waits) exceeds
// the median rank's by the factor; waiting ranks are not stragglers.
#include <gtest/gtest.h>

#include "meshflow/train/stragglers.h"

namespace mf::train {
namespace {

std::vector<RankStepStats> ranks_of(const std::vector<std::pair<double, double>>& step_and_wait) {
  std::vector<RankStepStats> out;
  for (size_t r = 0; r < step_and_wait.size(); ++r) {
    RankStepStats x;
    x.rank = static_cast<int>(r);
    x.mean_step_s = step_and_wait[r].first;
    x.mean_comm_wait_s = step_and_wait[r].second;
    out.push_back(x);
  }
  return out;
}

TEST(Stragglers, TheSlowComputingRankIsNamedNotTheWaitingOnes) {
  // Every step takes 1 s; rank 2 computes 0.9 s of it, the others 0.3 s and wait for it.
  const auto ranks = ranks_of({{1.0, 0.7}, {1.0, 0.7}, {1.0, 0.1}, {1.0, 0.7}});
  const std::vector<Straggler> s = find_stragglers(ranks, 1.5);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 2);
  EXPECT_NEAR(s[0].compute_s, 0.9, 1e-12);
  EXPECT_NEAR(s[0].median_compute_s, 0.3, 1e-12);
  EXPECT_NEAR(s[0].ratio, 3.0, 1e-9);
  EXPECT_TRUE(find_stragglers(ranks, 3.5).empty());  // under the factor
  EXPECT_TRUE(find_stragglers(ranks, 0).empty());    // off
}

TEST(Stragglers, BalancedRanksOneRankAndIdleStepsHaveNone) {
  EXPECT_TRUE(find_stragglers(ranks_of({{1.0, 0.5}, {1.0, 0.45}, {1.0, 0.55}}), 1.2).empty());
  EXPECT_TRUE(find_stragglers(ranks_of({{1.0, 0.0}}), 1.2).empty());
  EXPECT_TRUE(find_stragglers(ranks_of({{0.0, 0.0}, {0.0, 0.0}}), 1.2).empty());
}

TEST(Stragglers, SlowestFirstWithAnEvenCountsMedian) {
  // compute: 0.1, 0.2, 0.5, 0.8 -> median 0.35; ranks 3 and 2 are over 1.4x.
  const std::vector<Straggler> s = find_stragglers(ranks_of({{1, 0.9}, {1, 0.8}, {1, 0.5}, {1, 0.2}}), 1.4);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].rank, 3);
  EXPECT_EQ(s[1].rank, 2);
  EXPECT_NEAR(s[0].median_compute_s, 0.35, 1e-12);
}

}  // namespace
}  // namespace mf::train
