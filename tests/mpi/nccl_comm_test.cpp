// The NCCL communicator on 2 or more GPUs (mpirun -np N, one GPU per rank; ctest cuda.nccl.np2,
// label cuda): every collective on GPU tensors against the values computed on the host, host
// tensors through the MPI group, a split, and a collective one rank never joins turned into an
// error by the watchdog. Exits 77 (skipped) when fewer GPUs than ranks are visible or the build
// has no NCCL.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "meshflow/comm/mpi/mpi_communicator.h"
#include "meshflow/core/device.h"
#include "meshflow/ops/ops.h"
#include "meshflow/runtime/device_select.h"
#if MESHFLOW_WITH_NCCL
#include "meshflow/comm/nccl/nccl_communicator.h"
#include "meshflow/cuda/device_info.h"
#endif

namespace {

int g_failures = 0;

void check(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, what.c_str());
}

#if MESHFLOW_WITH_NCCL
using mf::Tensor;

// Rank `rank`'s values on the GPU: rank * 100 + i, as dtype.
Tensor ranked(int64_t n, int rank, mf::DType dt, mf::Device dev) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(rank * 100 + i);
  return mf::to(mf::cast(mf::from_vector(v, {n}), dt), dev);
}

std::vector<double> host_values(const Tensor& t) {
  return mf::cast(mf::to(t, mf::cpu_device()), mf::DType::kF64).to_vector<double>();
}

// bf16 keeps 8 significant bits: sums above 256 round (NCCL rounds at each combining step).
void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what, int rank) {
  const std::vector<double> got = host_values(t);
  const double tol = t.dtype() == mf::DType::kBF16 ? 1e-2 : 1e-6;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i]));
  check(ok, what + ": values differ from the host's", rank);
}

void run_tests(mf::comm::Communicator& c, mf::Device dev) {
  const int r = c.rank(), n = c.size();
  for (mf::DType dt : {mf::DType::kF32, mf::DType::kBF16, mf::DType::kF64, mf::DType::kI64}) {
    const std::string tag = std::string(" ") + mf::dtype_name(dt);
    const int64_t m = 6;
    // all_reduce: sum over ranks of rank * 100 + i.
    Tensor t = ranked(m, r, dt, dev);
    c.all_reduce(t)->wait();
    std::vector<double> want(m);
    for (int64_t i = 0; i < m; ++i) want[static_cast<size_t>(i)] = 100.0 * n * (n - 1) / 2 + static_cast<double>(n * i);
    expect_values(t, want, "all_reduce" + tag, r);
    // all_gather: block q is rank q's values.
    Tensor out = mf::to(mf::zeros({n * m}, dt), dev);
    c.all_gather(ranked(m, r, dt, dev), out)->wait();
    want.assign(static_cast<size_t>(n * m), 0);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < m; ++i) want[static_cast<size_t>(q * m + i)] = q * 100 + static_cast<double>(i);
    expect_values(out, want, "all_gather" + tag, r);
    // reduce_scatter: block r of the sum.
    Tensor mine = mf::to(mf::zeros({m}, dt), dev);
    c.reduce_scatter(ranked(n * m, r, dt, dev), mine)->wait();
    want.assign(static_cast<size_t>(m), 0);
    for (int64_t i = 0; i < m; ++i)
      for (int q = 0; q < n; ++q) want[static_cast<size_t>(i)] += q * 100 + static_cast<double>(r * m + i);
    expect_values(mine, want, "reduce_scatter" + tag, r);
    // all_to_all: block q of out is block r of rank q's in.
    Tensor a2a = mf::to(mf::zeros({n * m}, dt), dev);
    c.all_to_all(ranked(n * m, r, dt, dev), a2a)->wait();
    want.assign(static_cast<size_t>(n * m), 0);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < m; ++i) want[static_cast<size_t>(q * m + i)] = q * 100 + static_cast<double>(r * m + i);
    expect_values(a2a, want, "all_to_all" + tag, r);
    // broadcast from the last rank.
    Tensor b = ranked(m, r, dt, dev);
    c.broadcast(b, n - 1)->wait();
    want.assign(static_cast<size_t>(m), 0);
    for (int64_t i = 0; i < m; ++i) want[static_cast<size_t>(i)] = (n - 1) * 100 + static_cast<double>(i);
    expect_values(b, want, "broadcast" + tag, r);
  }
  // send/recv around a ring: recv posted first on odd ranks, so no pair waits on itself.
  {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    Tensor got = mf::to(mf::zeros({4}, mf::DType::kF32), dev);
    mf::comm::WorkPtr s, rv;
    if (r % 2 == 0) {
      s = c.send(ranked(4, r, mf::DType::kF32, dev), next, 7);
      rv = c.recv(got, prev, 7);
    } else {
      rv = c.recv(got, prev, 7);
      s = c.send(ranked(4, r, mf::DType::kF32, dev), next, 7);
    }
    s->wait();
    rv->wait();
    expect_values(got, {prev * 100.0, prev * 100.0 + 1, prev * 100.0 + 2, prev * 100.0 + 3}, "send/recv", r);
  }
  // Host tensors go through the MPI group.
  Tensor h = mf::full({1}, static_cast<double>(r + 1), mf::DType::kF64);
  c.all_reduce(h, mf::comm::ReduceOp::kMax)->wait();
  check(h.item() == n, "host all_reduce(max) through MPI", r);
  c.barrier()->wait();
  // A split: even and odd ranks.
  mf::comm::CommPtr half = c.split(r % 2, r);
  check(half && half->size() == (n + 1 - r % 2) / 2 && std::string(half->backend()) == "nccl", "split", r);
  Tensor one = mf::to(mf::ones({3}, mf::DType::kF32), dev);
  half->all_reduce(one)->wait();
  expect_values(one, std::vector<double>(3, static_cast<double>(half->size())), "all_reduce on the split", r);
}

// Rank 0 issues an all_reduce the others never join: the watchdog aborts the communicator after
// the timeout and the next wait() throws naming the op. The others only wait for rank 0.
void run_timeout_test(const std::shared_ptr<mf::comm::MpiCommunicator>& mpi, mf::Device dev) {
  auto c = mf::comm::NcclCommunicator::create(mpi);
  c->set_timeout_seconds(2);
  if (c->rank() == 0) {
    Tensor t = ranked(8, 0, mf::DType::kF32, dev);
    mf::comm::WorkPtr w = c->all_reduce(t);
    w->wait();  // does not block the host
    bool threw = false;
    for (int i = 0; i < 100 && !threw; ++i) {  // up to 10 s
      try {
        Tensor u = ranked(8, 0, mf::DType::kF32, dev);
        c->all_reduce(u)->wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } catch (const mf::Error& e) {
        threw = std::string(e.what()).find("all_reduce(sum) f32(8,)") != std::string::npos &&
                std::string(e.what()).find("aborted") != std::string::npos;
        if (!threw) std::fprintf(stderr, "[rank 0] unexpected error: %s\n", e.what());
        else std::printf("watchdog: %s\n", e.what());
        break;
      }
    }
    check(threw, "a collective the other ranks never join did not fail after the timeout", 0);
  }
  mpi->barrier()->wait();
  c->abort("the test is over");  // rank 0's half is gone: nothing to destroy collectively
}
#endif

}  // namespace

int main(int argc, char** argv) {
  mf::comm::MpiRuntime runtime(&argc, &argv);
  const mf::comm::CommPtr world = runtime.world();
  const int rank = world->rank(), size = world->size();
#if MESHFLOW_WITH_NCCL
  if (mf::cuda_device_count() < size) {
    if (rank == 0)
      std::printf("SKIP: %d rank(s) need as many GPUs, %d visible\n", size, mf::cuda_device_count());
    return 77;
  }
  const int local = mf::runtime::local_rank_from_env();
  mf::cuda::use_device(local);
  const mf::Device dev = mf::cuda_device(local);
  auto mpi = std::dynamic_pointer_cast<mf::comm::MpiCommunicator>(world);
  try {
    auto c = mf::comm::NcclCommunicator::create(mpi);
    c->set_timeout_seconds(60);
    run_tests(*c, dev);
    run_timeout_test(mpi, dev);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  if (rank == 0) std::printf("nccl communicator on %d GPUs: %s\n", size, g_failures ? "FAILED" : "passed");
  return g_failures ? 1 : 0;
#else
  if (rank == 0) std::printf("SKIP: this build has no NCCL communicator\n");
  (void)check;
  (void)size;
  return 77;
#endif
}
