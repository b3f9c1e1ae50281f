// train.dist.device_type: the local rank from the launcher's environment, cpu runs unchanged, and
// the one-line errors of a cuda run in a build or on a machine without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "meshflow/config/config.h"
#include "meshflow/core/device.h"
#include "meshflow/core/error.h"
#include "meshflow/runtime/device_select.h"
#if MESHFLOW_WITH_CUDA
#include "meshflow/cuda/device_info.h"
#endif

namespace {

// Clears the local-rank variables for the test and restores them after.
class LocalRankEnv : public ::testing::Test {
 protected:
  static constexpr const char* kVars[4] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
  void SetUp() override {
    for (int i = 0; i < 4; ++i) {
      const char* v = std::getenv(kVars[i]);
      saved_[i] = v ? std::string(v) : std::string();
      had_[i] = v != nullptr;
      unsetenv(kVars[i]);
    }
  }
  void TearDown() override {
    for (int i = 0; i < 4; ++i) {
      if (had_[i]) setenv(kVars[i], saved_[i].c_str(), 1);
      else unsetenv(kVars[i]);
    }
  }
  std::string saved_[4];
  bool had_[4] = {};
};

TEST_F(LocalRankEnv, PrecedenceAndDefault) {
  std::string src = "x";
  EXPECT_EQ(mf::runtime::local_rank_from_env(&src), 0);
  EXPECT_EQ(src, "");
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(mf::runtime::local_rank_from_env(&src), 3);
  EXPECT_EQ(src, "SLURM_LOCALID");
  setenv("MPI_LOCALRANKID", "2", 1);
  EXPECT_EQ(mf::runtime::local_rank_from_env(&src), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(mf::runtime::local_rank_from_env(&src), 1);
  EXPECT_EQ(src, "OMPI_COMM_WORLD_LOCAL_RANK");
  setenv("LOCAL_RANK", "5", 1);
  EXPECT_EQ(mf::runtime::local_rank_from_env(&src), 5);
  EXPECT_EQ(src, "LOCAL_RANK");
  setenv("LOCAL_RANK", "five", 1);
  try {
    mf::runtime::local_rank_from_env();
    FAIL() << "a non-numeric LOCAL_RANK was accepted";
  } catch (const mf::Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOCAL_RANK='five' is not a local rank"), std::string::npos) << e.what();
  }
}

TEST_F(LocalRankEnv, CpuIsTheDefault) {
  mf::Config c;
  const mf::runtime::RunDevice d = mf::runtime::select_run_device(c);
  EXPECT_EQ(d.device, mf::cpu_device());
  c.set("train.dist.device_type", "tpu", "test");
  EXPECT_THROW(mf::runtime::select_run_device(c), mf::Error);
}

TEST_F(LocalRankEnv, CudaWithoutAGpuFailsWithOneLine) {
  if (mf::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  mf::Config c;
  c.set("train.dist.device_type", "cuda", "test");
  try {
    mf::runtime::select_run_device(c);
    FAIL() << "device_type=cuda was accepted without a GPU";
  } catch (const mf::Error& e) {
    const std::string msg = e.what();
    const std::string want = mf::cuda_backend_compiled()
                                 ? "train.dist.device_type=cuda: no CUDA device is visible on this machine"
                                 : "train.dist.device_type=cuda: this build has no CUDA backend (configure with the CUDA toolkit)";
    EXPECT_EQ(msg.rfind(want, 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

#if MESHFLOW_WITH_CUDA
TEST(CudaPeakFlops, TableByName) {
  EXPECT_DOUBLE_EQ(mf::cuda::peak_flops_for_name("NVIDIA H200", mf::DType::kBF16), 989.4e12);
  EXPECT_DOUBLE_EQ(mf::cuda::peak_flops_for_name("NVIDIA H100 80GB HBM3", mf::DType::kF16), 989.4e12);
  EXPECT_DOUBLE_EQ(mf::cuda::peak_flops_for_name("NVIDIA H200", mf::DType::kF32), 67e12);
  EXPECT_DOUBLE_EQ(mf::cuda::peak_flops_for_name("Some Other GPU", mf::DType::kBF16), 0.0);
}
#endif

}  // namespace
