// The MPI backend (built with MESHFLOW_WITH_MPI): CPU tensors over MPI's nonblocking calls.
//
//  - MpiRuntime: RAII guard for MPI_Init_thread(MPI_THREAD_FUNNELED) ... MPI_Finalize. Every MPI
//    call, and so every communication call and Work::wait(), must come from the thread that
//    created it (FUNNELED). Its world() is a duplicate of MPI_COMM_WORLD, so library traffic never
//    matches user traffic on MPI_COMM_WORLD.
//  - Communicators set MPI_ERRORS_RETURN: a failing MPI call throws mf::Error (MF_MPI_CHECK, with
//    the expression, the MPI error string and the location) instead of aborting the job.
//  - bf16/f16 are 2-byte MPI datatypes; their reductions are user MPI_Ops that widen each pair to
//    f32, combine and round back (ties to even). Rounding happens at every combining step, as in
//    NCCL's native bf16 reductions, and the wire carries 2 bytes per element, matching the byte
//    counters. (An f32 staging buffer would round once but send twice the bytes.)
//  - Work::wait() polls MPI_Test (spinning briefly, then yielding, then sleeping 100 us so that
//    oversubscribed ranks leave each other the cores) and throws after the communicator's
//    timeout_seconds(). The operation then stays pending: waiting again resumes it (if the late
//    rank joins after all), destroying the Work waits once more up to the timeout and otherwise
//    leaks the buffers deliberately, since MPI may still write them.
//  - A dead peer: when a rank exits or is killed, OpenMPI's mpirun terminates the whole job
//    ("mpirun has exited due to process rank N ..."), so survivors do not hang. A rank that is
//    alive but stuck or issued a different collective is caught by the timeout; the top-level
//    catch in main then exits non-zero (or calls MPI_Abort), and mpirun ends the other ranks.
#pragma once
#include <mpi.h>

#include <memory>

#include "meshflow/comm/communicator.h"

namespace mf::comm {

namespace detail {
[[noreturn]] void throw_mpi_error(int rc, const char* expr, const char* file, int line, const std::string& context);
}

// MF_MPI_CHECK(MPI_Xxx(...) [, context parts...]): throws mf::Error naming the call, the MPI
// error string, the context and the location when the call does not return MPI_SUCCESS.
#define MF_MPI_CHECK(expr, ...)                                                                         \
  do {                                                                                                  \
    int mf_mpi_rc_ = (expr);                                                                            \
    if (mf_mpi_rc_ != MPI_SUCCESS)                                                                      \
      ::mf::comm::detail::throw_mpi_error(mf_mpi_rc_, #expr, __FILE__, __LINE__,                        \
                                          ::mf::detail::cat("" __VA_OPT__(, ) __VA_ARGS__));            \
  } while (0)

// Owns one MPI communicator handle; frees it unless MPI is already finalised.
class MpiCommHandle {
 public:
  explicit MpiCommHandle(MPI_Comm comm) : comm_(comm) {}
  ~MpiCommHandle();
  MpiCommHandle(const MpiCommHandle&) = delete;
  MpiCommHandle& operator=(const MpiCommHandle&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_;
};

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (a communicator this process created: dup, split, ...).
  static std::shared_ptr<MpiCommunicator> adopt(MPI_Comm comm);
  MPI_Comm mpi_comm() const { return handle_->get(); }
  const char* backend() const override { return "mpi"; }
  // MPI_Comm_split: blocking, collective over this communicator.
  CommPtr split(int color, int key) override;

 protected:
  WorkPtr do_all_reduce(Tensor& inout, ReduceOp op, std::string what) override;
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, std::string what) override;
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, std::string what) override;
  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, std::string what) override;
  WorkPtr do_broadcast(Tensor& t, int root, std::string what) override;
  WorkPtr do_send(const Tensor& t, int peer, int tag, std::string what) override;
  WorkPtr do_recv(Tensor& t, int peer, int tag, std::string what) override;
  WorkPtr do_barrier(std::string what) override;
  DeviceType device_type() const override { return DeviceType::kCPU; }

 private:
  MpiCommunicator(std::shared_ptr<MpiCommHandle> handle, int rank, int size, std::vector<int> world_ranks);
  std::shared_ptr<MpiCommHandle> handle_;
};

// RAII guard: MPI_Init_thread (MPI_THREAD_FUNNELED or higher, checked) in the constructor, the
// world communicator, the bf16/f16 datatypes and ops; MPI_Finalize in the destructor. If MPI was
// already initialised by someone else, it is neither initialised nor finalised here. At most one
// runtime exists at a time.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  const CommPtr& world() const { return world_; }
  int thread_level() const { return thread_level_; }

 private:
  bool owns_init_ = false;
  int thread_level_ = 0;
  CommPtr world_;
};

// Same as constructing MpiRuntime(&argc, &argv).
MpiRuntime mpi_init(int& argc, char**& argv);
// The world communicator of the live MpiRuntime; throws if there is none.
CommPtr mpi_world();

}  // namespace mf::comm
