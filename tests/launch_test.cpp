// `meshflow launch`'s pieces without MPI: a failure's cause from Open MPI's and Slurm's lines, the
// layout on fewer processes (global batch kept, tp and pp refused when they do not fit), the
// attempt's argv, and the supervision loop driven by a fake launcher script.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>
#include <nlohmann/json.hpp>

#include "data_testing.h"
#include "testing.h"
#include "meshflow/config/config.h"
#include "meshflow/core/file_lock.h"
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
  EXPECT_EQ(base.dims.size("dp"), 4);
  EXPECT_EQ(base.accumulation, 1);
  EXPECT_EQ(base.global_batch(), 8);
  const mf::launch::Layout two = mf::launch::moved_layout(c, base, 2);
  EXPECT_EQ(two.dims.size("dp"), 2);
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
  EXPECT_EQ(base.dims.size("dp"), 2);
  EXPECT_EQ(base.accumulation, 2);
  try {
    (void)mf::launch::moved_layout(c, base, 3);
    FAIL() << "3 processes cannot hold tp=2";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel_size 2"), std::string::npos) << e.what();
  }
  const mf::launch::Layout two = mf::launch::moved_layout(c, base, 2);
  EXPECT_EQ(two.dims.size("tp"), 2);
  EXPECT_EQ(two.dims.size("dp"), 1);
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

// ---- A damaged checkpoint, a run folder in use, a stop signal.

std::string script(const mft::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\necho \"$*\" >> " << dir.file("calls.txt") << "\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

mf::launch::LaunchOptions options_for(const mft::TempDir& dir, const std::string& launcher,
                                      std::vector<std::string> extra = {}) {
  mf::launch::LaunchOptions o;
  o.launcher = launcher;
  o.program = "/opt/meshflow";
  o.config = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt2/tiny.yaml";
  o.overrides = {"train.output_dir=" + dir.file("run")};
  o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
  o.nproc = 1;
  return o;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The newest checkpoint is damaged and the ranks' error names the previous complete one: the
// restart resumes from that one (one restart, not --max-restarts of the same failure).
TEST(LaunchSupervisor, FallsBackFromADamagedCheckpointToThePreviousOne) {
  mft::TempDir dir;
  const std::string ckpts = dir.file("run/checkpoints");
  std::filesystem::create_directories(ckpts + "/iter_0000002");
  std::filesystem::create_directories(ckpts + "/iter_0000003");
  std::ofstream(ckpts + "/iter_0000002/metadata.json") << "{}\n";
  std::ofstream(ckpts + "/iter_0000003/metadata.json") << "{}\n";
  std::ofstream(ckpts + "/latest") << "iter_0000003\n";
  const std::string launcher = script(dir, "damaged.sh",
      "if grep -q iter_0000003 " + ckpts + "/latest; then\n"
      "  echo 'meshflow: error: " + ckpts + "/iter_0000003/shard_00000.safetensors: checksum mismatch (the file was "
      "corrupted after it was written); the previous complete checkpoint is iter_0000002: to resume from it, write its "
      "name into " + ckpts + "/latest' >&2\n  exit 1\nfi\nexit 0\n");
  EXPECT_EQ(mf::launch::run_launch(options_for(dir, launcher, {"train.resume=true"})), 0);
  const std::vector<nlohmann::json> log = read_jsonl(dir.file("run/launch.jsonl"));
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["fell_back_to"], "iter_0000002");
  EXPECT_EQ(log[1]["action"], "finished");
  EXPECT_EQ(text_of(ckpts + "/latest"), "iter_0000002\n");
  EXPECT_TRUE(std::filesystem::exists(ckpts + "/iter_0000003"));  // kept for a look
}

// A launch on a folder where a run trains (its .lock held) or another launch supervises (its
// .launch.lock held) stops before any attempt and writes nothing there.
TEST(LaunchSupervisor, RefusesAFolderInUse) {
  mft::TempDir dir;
  std::filesystem::create_directories(dir.file("run/checkpoints"));
  const std::string launcher = script(dir, "ok.sh", "exit 0\n");
  for (const char* file : {".lock", ".launch.lock"}) {
    mf::FileLock held(dir.file("run/") + file);
    ASSERT_TRUE(held.locked());
    MFT_EXPECT_ERROR(mf::launch::run_launch(options_for(dir, launcher, {"train.resume=true"})),
                     "is in use by another run", file);
    EXPECT_FALSE(std::filesystem::exists(dir.file("calls.txt")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("run/launch.jsonl")));
  }
  MFT_EXPECT_ERROR(mf::launch::run_launch(options_for(dir, launcher, {"train.resume=true", "train.output_dir=" +
                                                                      dir.file("nowhere")})),
                   "train.resume: train.output_dir", "does not exist");
}

// SIGTERM to the supervisor: the job gets SIGUSR1 (its ranks save a step and exit 0), the launch
// exits 0 and does not restart.
TEST(LaunchSupervisor, PassesAStopSignalOnAsSigusr1AndDoesNotRestart) {
  mft::TempDir dir;
  const std::string launcher = script(dir, "stoppable.sh",
      "trap 'echo USR1 > " + dir.file("got") + "; exit 0' USR1\n"
      "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done\nexit 3\n");
  std::thread sender([&] {
    for (int i = 0; i < 600 && !std::filesystem::exists(dir.file("calls.txt")); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(::getpid(), SIGTERM);
  });
  const int rc = mf::launch::run_launch(options_for(dir, launcher));
  sender.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(text_of(dir.file("got")), "USR1\n");
  const std::vector<nlohmann::json> log = read_jsonl(dir.file("run/launch.jsonl"));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0]["action"], "stopped");
  EXPECT_EQ(log[0]["exit_status"], "exit code 0");
}

}  // namespace
