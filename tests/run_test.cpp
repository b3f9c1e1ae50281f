// Whole runs through the config, data and trainer layers: re-running from the dumped
// config.yaml reproduces the run bit for bit; an interrupted run resumed from its checkpoint
// ends with the same weights as an uninterrupted one.
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "meshflow/core/atomic_file.h"
#include "meshflow/data/preprocess.h"
#include "meshflow/runtime/build.h"
#include "meshflow/train/run.h"
#include "testing.h"

namespace {
using namespace mft;
namespace fs = std::filesystem;

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("mf_run_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::string text;
    const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"};
    for (int d = 0; d < 120; ++d) {
      for (int w = 0; w < 12 + d % 7; ++w) text += std::string(words[(d * 7 + w * 5) % 12]) + (w % 5 == 4 ? ".\n" : " ");
      text += "\n%\n";
    }
    mf::write_file_atomic((dir_ / "corpus.txt").string(), text);
    mf::ByteTokenizer tok;
    prefix_ = mf::preprocess({(dir_ / "corpus.txt").string()}, (dir_ / "corpus").string(), tok).prefix;
  }
  void TearDown() override { fs::remove_all(dir_); }

  mf::Config config(const std::string& out) const {
    mf::Config c;
    for (const char* kv : {"model.num_layers=2", "model.hidden_size=32", "model.num_attention_heads=4",
                           "model.max_seq_length=32", "model.vocab_size=257", "train.train_iter=6",
                           "train.train_micro_batch_size=2", "train.test_micro_batch_size=2", "train.log_period=1",
                           "train.evaluation.eval_period=3", "train.evaluation.eval_iter=2", "train.checkpointer.period=3",
                           "train.scheduler.warmup_iter=2", "tokenization.tokenizer=byte", "data.splits=90,10,0",
                           "optim.lr=3e-3"})
      c.apply_override(kv);
    c.set("data.data_prefix", prefix_);
    c.set("train.output_dir", (dir_ / out).string());
    return c;
  }
  std::string final_weights(const std::string& out) const {
    return mf::read_file((dir_ / out / "checkpoints" / "iter_0000006" / "shard_00000.safetensors").string());
  }
  std::vector<std::string> loss_lines(const std::string& out) const {
    std::ifstream in(dir_ / out / "metrics.jsonl");
    std::vector<std::string> r;
    for (std::string line; std::getline(in, line);) r.push_back(line.substr(0, line.find(",\"tokens_per_sec\"")));
    return r;
  }
  fs::path dir_;
  std::string prefix_;
};

TEST_F(RunTest, DumpedConfigReproducesTheRunBitForBit) {
  std::FILE* quiet = std::fopen("/dev/null", "w");
  auto a = mf::train::run_training(config("a"), quiet);
  EXPECT_LT(a.final_train_loss, 5.6);  // it learns: ln(257) = 5.55 at the start
  mf::Config again = mf::Config::load((dir_ / "a" / "config.yaml").string(), {"train.output_dir=" + (dir_ / "b").string()});
  mf::train::run_training(again, quiet);
  std::fclose(quiet);
  auto la = loss_lines("a"), lb = loss_lines("b");
  ASSERT_EQ(la.size(), 8u);  // 6 steps + 2 evaluations
  EXPECT_EQ(la, lb);
  EXPECT_EQ(final_weights("a"), final_weights("b"));
  EXPECT_TRUE(fs::exists(dir_ / "a" / "tensorboard"));
}

TEST_F(RunTest, InterruptedRunResumesToTheSameWeights) {
  std::FILE* quiet = std::fopen("/dev/null", "w");
  mf::train::run_training(config("straight"), quiet);
  mf::Config first = config("resumed");
  first.set("train.exit_iter", "3");
  mf::train::run_training(first, quiet);
  mf::Config second = config("resumed");
  second.set("train.resume", "true");
  mf::train::run_training(second, quiet);
  std::fclose(quiet);
  EXPECT_EQ(final_weights("straight"), final_weights("resumed"));
  EXPECT_EQ(loss_lines("straight"), loss_lines("resumed"));
}

// train.threads is the run's OpenMP thread count; 0 leaves OpenMP's default alone.
TEST_F(RunTest, TrainThreadsSetsTheOpenMpThreadCount) {
  const int before = omp_get_max_threads();
  const int want = before == 1 ? 2 : 1;
  mf::Config c = config("threads");
  c.set("train.threads", std::to_string(want));
  c.set("train.train_iter", "1");
  c.set("train.evaluation.enabled", "false");
  std::FILE* quiet = std::fopen("/dev/null", "w");
  mf::train::run_training(c, quiet);
  std::fclose(quiet);
  EXPECT_EQ(omp_get_max_threads(), want);
  c.set("train.threads", "0");
  EXPECT_EQ(mf::runtime::apply_thread_count(c), want);  // unchanged
  MFT_EXPECT_ERROR(c.set("train.threads", "-1"), "train.threads=-1 is outside its range [0, inf)");
  omp_set_num_threads(before);
}

}  // namespace
