// main() of meshflow_mpi_tests (run under mpirun): initialises MPI, runs the same tests in the
// same order on every rank. Rank 0 prints GoogleTest's usual output; other ranks print only their
// failures, prefixed "[rank r]". The exit code is non-zero on every rank if any rank failed.
#include <gtest/gtest.h>

#include <cstdio>

#include "meshflow/comm/mpi/mpi_communicator.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime runtime(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  mf::comm::CommPtr world = runtime.world();
  // A test that desynchronises the ranks fails after this long instead of hanging.
  world->set_timeout_seconds(30);
  if (world->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world->rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  mf::Tensor flag = mf::full({1}, failed, mf::DType::kI32);
  world->all_reduce(flag, mf::comm::ReduceOp::kMax)->wait();
  return flag.data<int32_t>()[0] != 0 ? 1 : 0;
}
