// Pipeline schedules against their definitions, and a simulation of all stages together: every
// schedule completes (no stage waits forever) and, with forward 1 and backward 2 time units,
// its bubble is (p - 1) / (m + p - 1).
#include <algorithm>
#include <random>
#include <vector>

#include "meshflow/parallel/pipeline_schedule.h"
#include "testing.h"

namespace {

using mf::parallel::PipelineAction;
using mf::parallel::PipelineSchedule;
using mf::parallel::pipeline_actions;

TEST(PipelineSchedule, GpipeRunsAllForwardsThenAllBackwards) {
  for (int64_t s = 0; s < 4; ++s)
    EXPECT_EQ(mf::parallel::actions_str(pipeline_actions(PipelineSchedule::kGpipe, 4, s, 3)), "F0 F1 F2 B0 B1 B2");
}

TEST(PipelineSchedule, OneFOneBWarmsUpAlternatesAndDrains) {
  auto str = [](int64_t stages, int64_t stage, int64_t m) {
    return mf::parallel::actions_str(pipeline_actions(PipelineSchedule::k1F1B, stages, stage, m));
  };
  EXPECT_EQ(str(4, 0, 6), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(str(4, 1, 6), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(str(4, 3, 6), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(str(4, 0, 2), "F0 F1 B0 B1");  // fewer micro-batches than stages
}

TEST(PipelineSchedule, InFlightBounds) {
  for (int64_t p : {1, 2, 4})
    for (int64_t m : {1, 3, 8})
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(mf::parallel::max_in_flight(pipeline_actions(PipelineSchedule::k1F1B, p, s, m)), std::min(p - s, m));
        EXPECT_EQ(mf::parallel::max_in_flight(pipeline_actions(PipelineSchedule::kGpipe, p, s, m)), m);
        auto a = pipeline_actions(PipelineSchedule::k1F1B, p, s, m);
        EXPECT_EQ(a.back(), (PipelineAction{false, m - 1}));  // gradients final in the last action
      }
}

// Runs all stages' action lists with their dependencies — F(i) of virtual stage j after F(i) of
// j - 1, B(i) of j after B(i) of j + 1 (and F(i) of j) — where virtual stage j = c p + s is chunk
// c of rank s. Sends never block, an action waits for its input. Returns the makespan; fails the
// test on a deadlock. tf, tb: one whole stage's forward and backward time (a chunk takes 1/v).
double simulate(PipelineSchedule sched, int64_t p, int64_t m, double tf, double tb, int64_t v = 1) {
  std::vector<std::vector<PipelineAction>> acts;
  for (int64_t s = 0; s < p; ++s) acts.push_back(pipeline_actions(sched, p, s, m, v));
  const int64_t stages = p * v;
  std::vector<std::vector<double>> fdone(stages, std::vector<double>(m, -1)), bdone(stages, std::vector<double>(m, -1));
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      if (next[s] == acts[s].size()) continue;
      const PipelineAction& a = acts[s][next[s]];
      const int64_t j = a.chunk * p + s;
      double ready;
      if (a.forward) {
        ready = j == 0 ? 0 : fdone[j - 1][a.micro];
      } else {
        ready = j == stages - 1 ? fdone[j][a.micro] : bdone[j + 1][a.micro];
      }
      if (ready < 0) continue;
      clock[s] = std::max(clock[s], ready) + (a.forward ? tf : tb) / static_cast<double>(v);
      (a.forward ? fdone : bdone)[j][a.micro] = clock[s];
      ++next[s];
      progress = true;
    }
  }
  for (int64_t s = 0; s < p; ++s) EXPECT_EQ(next[s], acts[s].size()) << "stage " << s << " deadlocked";
  return *std::max_element(clock.begin(), clock.end());
}

TEST(PipelineSchedule, SimulatedBubbleMatchesTheory) {
  for (auto sched : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B})
    for (int64_t p : {2, 4})
      for (int64_t m : {1, 4, 8}) {
        const double span = simulate(sched, p, m, 1.0, 2.0), work = 3.0 * static_cast<double>(m);
        const double bubble = (span - work) / span, theory = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
        EXPECT_NEAR(bubble, theory, 1e-12) << mf::parallel::pipeline_schedule_name(sched) << " p=" << p << " m=" << m;
      }
}

// Interleaving v chunks per rank divides the bubble by v: (p - 1) / (v m + p - 1).
TEST(PipelineSchedule, InterleavedBubbleShrinksWithChunks) {
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        const double span = simulate(PipelineSchedule::kInterleaved1F1B, p, m, 1.0, 2.0, v), work = 3.0 * static_cast<double>(m);
        const double bubble = (span - work) / span;
        const double theory = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
        EXPECT_NEAR(bubble, theory, 1e-9) << "p=" << p << " v=" << v << " m=" << m;
        for (int64_t s = 0; s < p; ++s) {
          auto a = pipeline_actions(PipelineSchedule::kInterleaved1F1B, p, s, m, v);
          EXPECT_EQ(static_cast<int64_t>(a.size()), 2 * m * v);
          EXPECT_EQ(a.back(), (PipelineAction{false, m - 1, 0}));
        }
      }
  EXPECT_EQ(mf::parallel::actions_str(pipeline_actions(PipelineSchedule::kInterleaved1F1B, 2, 1, 2, 2)),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 B0 B1");
  MFT_EXPECT_ERROR(pipeline_actions(PipelineSchedule::kInterleaved1F1B, 4, 0, 6, 2), "multiple of",
                   "train.dist.pipeline_parallel_size 4");
}

// sends_received against an execution of all stages in a random order (an action runs once the
// message it receives was sent; sends never block): whenever a stage's receive proves one of its
// sends received, the receiving stage has already run that receive. Every proven send is an
// earlier sending action, listed once. A sent output is proven by the backward of its
// micro-batch at the latest (it is released with the activations the stage keeps), and with 1F1B
// the sent gradients still unproven at any time do not grow with the micro-batches.
TEST(PipelineSchedule, SendsReceivedAreReceivedAndReleasedEarly) {
  struct Case {
    PipelineSchedule sched;
    int64_t p, v;
  };
  std::mt19937 rng(7);
  for (const Case& c : {Case{PipelineSchedule::kGpipe, 3, 1}, Case{PipelineSchedule::k1F1B, 2, 1},
                        Case{PipelineSchedule::k1F1B, 4, 1}, Case{PipelineSchedule::kInterleaved1F1B, 2, 2},
                        Case{PipelineSchedule::kInterleaved1F1B, 4, 3}}) {
    std::vector<int64_t> most_unproven;
    for (int64_t m : {c.p * 2, c.p * 8}) {
      const int64_t n = c.p * c.v;
      std::vector<std::vector<PipelineAction>> acts;
      std::vector<std::vector<std::vector<int64_t>>> proven;
      for (int64_t s = 0; s < c.p; ++s) {
        acts.push_back(pipeline_actions(c.sched, c.p, s, m, c.v));
        proven.push_back(mf::parallel::sends_received(c.sched, c.p, s, m, c.v));
        ASSERT_EQ(proven.back().size(), acts.back().size());
      }
      // Where stage `to` receives what action k of stage s sends (-1: it sends nothing).
      auto receiver = [&](int64_t s, int64_t k) -> std::pair<int64_t, int64_t> {
        const PipelineAction& a = acts[static_cast<size_t>(s)][static_cast<size_t>(k)];
        const int64_t j = a.chunk * c.p + s, to = a.forward ? j + 1 : j - 1;
        if (to < 0 || to >= n) return {-1, -1};
        const auto& theirs = acts[static_cast<size_t>(to % c.p)];
        const PipelineAction want{a.forward, a.micro, to / c.p};
        return {to % c.p, std::find(theirs.begin(), theirs.end(), want) - theirs.begin()};
      };
      std::vector<std::vector<bool>> fsent(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(m))),
          bsent = fsent;
      std::vector<size_t> next(static_cast<size_t>(c.p), 0);
      std::vector<int64_t> unproven(static_cast<size_t>(c.p), 0);
      std::vector<std::vector<int>> times_proven(static_cast<size_t>(c.p));
      for (int64_t s = 0; s < c.p; ++s) times_proven[static_cast<size_t>(s)].assign(acts[static_cast<size_t>(s)].size(), 0);
      int64_t most = 0;
      for (;;) {
        std::vector<int64_t> runnable;
        for (int64_t s = 0; s < c.p; ++s) {
          const size_t i = next[static_cast<size_t>(s)];
          if (i == acts[static_cast<size_t>(s)].size()) continue;
          const PipelineAction& a = acts[static_cast<size_t>(s)][i];
          const int64_t j = a.chunk * c.p + s;
          const bool ready = a.forward ? (j == 0 || fsent[static_cast<size_t>(j)][static_cast<size_t>(a.micro)])
                                       : (j == n - 1 || bsent[static_cast<size_t>(j)][static_cast<size_t>(a.micro)]);
          if (ready) runnable.push_back(s);
        }
        if (runnable.empty()) break;
        const int64_t s = runnable[std::uniform_int_distribution<size_t>(0, runnable.size() - 1)(rng)];
        const size_t i = next[static_cast<size_t>(s)]++;
        for (int64_t k : proven[static_cast<size_t>(s)][i]) {
          ASSERT_LT(k, static_cast<int64_t>(i));
          const auto [to, at] = receiver(s, k);
          ASSERT_GE(to, 0) << "action " << k << " of stage " << s << " sends nothing";
          EXPECT_GT(next[static_cast<size_t>(to)], static_cast<size_t>(at))
              << "stage " << s << " takes its send of action " << k << " as received before stage " << to
              << " received it (m=" << m << ")";
          ++times_proven[static_cast<size_t>(s)][static_cast<size_t>(k)];
          if (!acts[static_cast<size_t>(s)][static_cast<size_t>(k)].forward) --unproven[static_cast<size_t>(s)];
        }
        const PipelineAction& a = acts[static_cast<size_t>(s)][i];
        const int64_t j = a.chunk * c.p + s;
        if (a.forward && j + 1 < n) fsent[static_cast<size_t>(j + 1)][static_cast<size_t>(a.micro)] = true;
        if (!a.forward && j > 0) bsent[static_cast<size_t>(j - 1)][static_cast<size_t>(a.micro)] = true;
        if (!a.forward && j + 1 < n) {  // its forward's output, sent on, is released with the micro-batch
          const auto& mine = acts[static_cast<size_t>(s)];
          const int64_t f = std::find(mine.begin(), mine.end(), PipelineAction{true, a.micro, a.chunk}) - mine.begin();
          EXPECT_EQ(times_proven[static_cast<size_t>(s)][static_cast<size_t>(f)], 1)
              << "stage " << s << " runs B" << a.micro << "." << a.chunk << " with its forward's send unproven";
        }
        if (!a.forward && j > 0) most = std::max(most, ++unproven[static_cast<size_t>(s)]);
      }
      for (int64_t s = 0; s < c.p; ++s) {
        ASSERT_EQ(next[static_cast<size_t>(s)], acts[static_cast<size_t>(s)].size());
        for (int t : times_proven[static_cast<size_t>(s)]) EXPECT_LE(t, 1);
      }
      most_unproven.push_back(most);
    }
    // (GPipe's backward phase receives nothing from the stage its gradients go to: they stay
    // until the step ends, while the activations, far larger, are freed.)
    if (c.sched != PipelineSchedule::kGpipe) {
      EXPECT_EQ(most_unproven[0], most_unproven[1])
          << mf::parallel::pipeline_schedule_name(c.sched) << " p=" << c.p << " v=" << c.v
          << ": the unproven sends grow with the micro-batches";
    }
  }
  EXPECT_TRUE(mf::parallel::sends_received(PipelineSchedule::k1F1B, 1, 0, 4)[3].empty());
}

TEST(PipelineSchedule, SplitLayersAndBadInput) {
  auto r = mf::parallel::split_layers(10, 4);
  EXPECT_EQ(r, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 8}, {8, 10}}));
  MFT_EXPECT_ERROR(mf::parallel::split_layers(3, 4), "model.num_layers 3", "4 stages");
  MFT_EXPECT_ERROR(mf::parallel::parse_pipeline_schedule("zigzag"), "train.dist.pipeline_schedule", "gpipe, 1f1b, interleaved_1f1b");
}

}  // namespace

namespace {

// Balanced stages: the head's cost (in layers) pushes layers off the last stage; at least one
// layer each; ties put more layers on earlier stages.
TEST(PipelineSchedule, BalancedSplitCountsTheHead) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(mf::parallel::balanced_split_layers(12, 2, 0.0, 0.0), (V{{0, 6}, {6, 12}}));
  EXPECT_EQ(mf::parallel::balanced_split_layers(12, 2, 0.0, 5.4), (V{{0, 9}, {9, 12}}));  // GPT-2 small's head
  EXPECT_EQ(mf::parallel::balanced_split_layers(12, 4, 0.0, 5.4), (V{{0, 4}, {4, 8}, {8, 11}, {11, 12}}));
  EXPECT_EQ(mf::parallel::balanced_split_layers(5, 2, 0.0, 0.0), (V{{0, 3}, {3, 5}}));
  EXPECT_EQ(mf::parallel::balanced_split_layers(4, 4, 0.0, 100.0), (V{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(mf::parallel::custom_split_layers({0, 0, 0, 1, 1, 2}, 6, 3), (V{{0, 3}, {3, 5}, {5, 6}}));
  MFT_EXPECT_ERROR(mf::parallel::custom_split_layers({0, 2, 2}, 3, 3), "custom_pipeline_stage_id", "layer 1 is on stage 2");
  MFT_EXPECT_ERROR(mf::parallel::custom_split_layers({0, 1}, 3, 2), "custom_pipeline_stage_id has 2 entries");
  MFT_EXPECT_ERROR(mf::parallel::custom_split_layers({0, 0, 0}, 3, 2), "names 1 stages");
  MFT_EXPECT_ERROR(mf::parallel::balanced_split_layers(3, 4, 0.0, 1.0), "model.num_layers 3");
}

}  // namespace

#include "meshflow/config/config.h"
#include "meshflow/runtime/build.h"

namespace {

// GPT-2 small over 4 stages: the first stage carries the embedding's weights and the most
// in-flight activations, the last the head's compute and the tied copy — both get fewer layers.
TEST(PipelineSchedule, Gpt2SmallStagesBalanceComputeAndMemory) {
  auto c = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/small.yaml", {"train.train_micro_batch_size=4"});
  auto r = mf::runtime::pipeline_layers(c, 4);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.front().first, 0);
  EXPECT_EQ(r.back().second, 12);
  for (size_t k = 1; k < r.size(); ++k) EXPECT_EQ(r[k].first, r[k - 1].second);
  auto n = [&](size_t k) { return r[k].second - r[k].first; };
  EXPECT_LT(n(0), n(1));
  EXPECT_LT(n(3), n(2));
  auto custom = mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/small.yaml",
                                 {"train.dist.custom_pipeline_stage_id=[0,0,0,0,0,0,1,1,1,1,1,1]"});
  EXPECT_EQ(mf::runtime::pipeline_layers(custom, 2), (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 12}}));
}

// train.dist.pipeline_num_layers (LiBai's) may only restate model.num_layers, with or without a
// pipeline: the stages always hold every layer.
TEST(PipelineSchedule, PipelineNumLayersMustBeTheModelsLayers) {
  const std::string small = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/small.yaml";
  for (const char* ok : {"train.dist.pipeline_num_layers=0", "train.dist.pipeline_num_layers=12"}) {
    mf::runtime::train_options(mf::Config::load(small, {ok}));
    mf::runtime::train_options(mf::Config::load(small, {ok, "train.dist.pipeline_parallel_size=2"}), 2);
  }
  for (const char* pp : {"train.dist.pipeline_parallel_size=1", "train.dist.pipeline_parallel_size=2"})
    MFT_EXPECT_ERROR(mf::runtime::train_options(mf::Config::load(small, {"train.dist.pipeline_num_layers=6", pp}), 2),
                     "train.dist.pipeline_num_layers 6 must be 0 or the model's layers (12");
}

}  // namespace
