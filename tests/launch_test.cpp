// `meshflow launch`'s pieces without MPI: a failure's cause from Open MPI's and Slurm's lines, the
// layout on fewer processes (global batch kept, tp and pp refused when they do not fit), the
// attempt's argv, and the supervision loop driven by a fake launcher script.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/launch/child.h"
#include "meshflow/launch/failure.h"
#include "meshflow/launch/layout.h"
#include "meshflow/launch/supervisor.h"

namespace {

using mf::launch::ExitStatus;

mf::Config tiny(std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"train.train_micro_batch_size=2", "model.num_layers=2"};
  o.insert(o.end(), extra.begin(), extra.end());
  return mf::Config::load(std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/tiny.yaml", o);
}

TEST(LaunchFailure, OpenMpiSignalNamesTheLostRank) {
  const std::vector<std::string> lines = {
      "--------------------------------------------------------------------------",
      "Primary job  terminated normally, but 1 process returned",
      "meshflow: error: [rank 2/3] terminated by the launcher: another rank of the job failed or died (see its message above)",
      "meshflow: error: [rank 0/3] terminated by the launcher: another rank of the job failed or died (see its message above)",
      "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."};
  const mf::launch::Failure f = mf::launch::classify_failure({137, 0}, lines);
  EXPECT_EQ(f.rank, 1);
  EXPECT_TRUE(f.rank_lost);
  EXPECT_EQ(f.cause, "rank 1 died on node vm: signal 9 (Killed)");
  EXPECT_TRUE(f.errors.empty());  // the survivors' lines say only that they were stopped
}

TEST(LaunchFailure, TheFirstRankErrorIsTheCause) {
  const std::vector<std::string> lines = {
      "meshflow: error: [rank 3/4] iteration 7: the loss is nan and the gradient norm nan; stopped",
      "meshflow: error: [rank 0/4] terminated by the launcher: another rank of the job failed or died",
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "  Process name: [[41651,1],3]", "  Exit code:    1"};
  const mf::launch::Failure f = mf::launch::classify_failure({1, 0}, lines);
  EXPECT_EQ(f.rank, 3);
  EXPECT_FALSE(f.rank_lost);
  EXPECT_EQ(f.cause, "rank 3: iteration 7: the loss is nan and the gradient norm nan; stopped");
  ASSERT_EQ(f.errors.size(), 1u);
}

TEST(LaunchFailure, SlurmTasksAndBareStatuses) {
  mf::launch::Failure f = mf::launch::classify_failure({9, 0}, {"srun: error: node7: task 2: Killed"});
  EXPECT_EQ(f.rank, 2);
  EXPECT_TRUE(f.rank_lost);
  f = mf::launch::classify_failure({2, 0}, {"  Process name: [[1,1],5]"});
  EXPECT_EQ(f.rank, 5);
  EXPECT_FALSE(f.rank_lost);
  f = mf::launch::classify_failure({0, 9}, {});
  EXPECT_TRUE(f.rank_lost);
  EXPECT_NE(f.cause.find("signal 9"), std::string::npos);
  f = mf::launch::classify_failure({3, 0}, {"something else"});
  EXPECT_EQ(f.cause, "the job ended with exit code 3");
  EXPECT_EQ(f.rank, -1);
}

TEST(LaunchLayout, FewerRanksKeepTheGlobalBatch) {
  const mf::Config c = tiny();
  const mf::launch::Layout base = mf::launch::run_layout(c, 4);
  EXPECT_EQ(base.dp, 4);
  EXPECT_EQ(base.accumulation, 1);
  EXPECT_EQ(base.global_batch(), 8);
  const mf::launch::Layout two = mf::launch::moved_layout(c, base, 2);
  EXPECT_EQ(two.dp, 2);
  EXPECT_EQ(two.accumulation, 2);
  EXPECT_EQ(two.global_batch(), 8);
  EXPECT_EQ(mf::launch::layout_overrides(two),
            (std::vector<std::string>{"train.dist.data_parallel_size=2", "train.num_accumulation_steps=2",
                                      "train.global_batch_size=8"}));
  EXPECT_THROW(mf::launch::moved_layout(c, base, 3), mf::Error);  // 8 is no multiple of 2 x 3
  EXPECT_EQ(mf::launch::next_smaller_nproc(c, base, 4, 1), 2);
  EXPECT_EQ(mf::launch::next_smaller_nproc(c, base, 2, 2), std::nullopt);
}

TEST(LaunchLayout, TensorAndPipelineSizesAreKept) {
  const mf::Config c = tiny({"train.dist.tensor_parallel_size=2", "train.global_batch_size=8"});
  const mf::launch::Layout base = mf::launch::run_layout(c, 4);
  EXPECT_EQ(base.dp, 2);
  EXPECT_EQ(base.accumulation, 2);
  try {
    (void)mf::launch::moved_layout(c, base, 3);
    FAIL() << "3 processes cannot hold tp=2";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel_size 2"), std::string::npos) << e.what();
  }
  const mf::launch::Layout two = mf::launch::moved_layout(c, base, 2);
  EXPECT_EQ(two.tp, 2);
  EXPECT_EQ(two.dp, 1);
  EXPECT_EQ(two.accumulation, 4);
}

TEST(LaunchArgv, LauncherWordsThenTheTrainingCommand) {
  mf::launch::LaunchOptions o;
  o.launcher = "fake-launcher  --oversubscribe --bind-to none";
  o.program = "/opt/meshflow";
  o.config = "cfg.yaml";
  o.overrides = {"optim.lr=1e-3"};
  EXPECT_EQ(mf::launch::attempt_argv(o, "/usr/local/bin/fake-launcher", 4, {"train.resume=true"}),
            (std::vector<std::string>{"/usr/local/bin/fake-launcher", "--oversubscribe", "--bind-to", "none", "-np", "4",
                                      "/opt/meshflow", "train", "cfg.yaml", "optim.lr=1e-3", "train.resume=true"}));
  EXPECT_EQ(mf::launch::find_executable("sh").empty(), false);
  EXPECT_EQ(mf::launch::find_executable("no-such-program-here"), "");
}

// A fake launcher: its first call fails as Open MPI does when a rank is killed, later calls
// succeed; every call appends its arguments to calls.txt.
std::string fake_launcher(const mft::TempDir& dir, int failures) {
  const std::string path = dir.file("fake_mpirun.sh");
  std::ofstream(path) << "#!/bin/sh\n"
                      << "echo \"$*\" >> " << dir.file("calls.txt") << "\n"
                      << "n=$(wc -l < " << dir.file("calls.txt") << ")\n"
                      << "if [ \"$n\" -le " << failures << " ]; then\n"
                      << "  echo 'mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).' >&2\n"
                      << "  exit 137\nfi\nexit 0\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(LaunchSupervisor, RestartsOnFewerRanksAfterALostRank) {
  mft::TempDir dir;
  mf::launch::LaunchOptions o;
  o.launcher = fake_launcher(dir, 1);
  o.program = "/opt/meshflow";
  o.config = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/tiny.yaml";
  o.overrides = {"train.train_micro_batch_size=2", "train.output_dir=" + dir.file("run")};
  o.nproc = 4;
  o.min_nproc = 2;
  EXPECT_EQ(mf::launch::run_launch(o), 0);
  const std::vector<nlohmann::json> log = read_jsonl(dir.file("run/launch.jsonl"));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["nproc"], 4);
  EXPECT_EQ(log[0]["failed_rank"], 1);
  EXPECT_EQ(log[0]["rank_lost"], true);
  EXPECT_EQ(log[0]["exit_status"], "exit code 137");
  EXPECT_EQ(log[0]["action"], "restart on 2 processes");
  EXPECT_EQ(log[1]["nproc"], 2);
  EXPECT_EQ(log[1]["num_accumulation_steps"], 2);
  EXPECT_EQ(log[1]["global_batch_size"], 8);
  EXPECT_EQ(log[1]["action"], "finished");
  std::ifstream calls(dir.file("calls.txt"));
  std::string first, second;
  std::getline(calls, first);
  std::getline(calls, second);
  EXPECT_EQ(first.find("train.resume"), std::string::npos) << first;
  EXPECT_NE(second.find("-np 2 /opt/meshflow train"), std::string::npos) << second;
  EXPECT_NE(second.find("train.resume=true train.dist.data_parallel_size=2 train.num_accumulation_steps=2"),
            std::string::npos)
      << second;
}

TEST(LaunchSupervisor, GivesUpAfterMaxRestarts) {
  mft::TempDir dir;
  mf::launch::LaunchOptions o;
  o.launcher = fake_launcher(dir, 100);
  o.program = "/opt/meshflow";
  o.config = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/tiny.yaml";
  o.overrides = {"train.output_dir=" + dir.file("run")};
  o.nproc = 2;
  o.max_restarts = 2;
  EXPECT_EQ(mf::launch::run_launch(o), 1);
  const std::vector<nlohmann::json> log = read_jsonl(dir.file("run/launch.jsonl"));
  ASSERT_EQ(log.size(), 3u);
  for (const auto& rec : log) EXPECT_EQ(rec["nproc"], 2);  // no --min-nproc: the same size
  EXPECT_EQ(log[2]["action"], "gave up");
}

TEST(LaunchSupervisor, RefusesBeforeAnyAttempt) {
  mft::TempDir dir;
  mf::launch::LaunchOptions o;
  o.launcher = fake_launcher(dir, 0);
  o.config = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/tiny.yaml";
  o.overrides = {"train.output_dir=" + dir.file("run"), "train.dist.tensor_parallel_size=2"};
  o.nproc = 4;
  o.min_nproc = 3;  // cannot hold tp=2
  EXPECT_THROW(mf::launch::run_launch(o), mf::Error);
  o.min_nproc = 0;
  std::filesystem::create_directories(dir.file("run/checkpoints"));  // a run is there
  EXPECT_THROW(mf::launch::run_launch(o), mf::Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("calls.txt")));
}

}  // namespace
