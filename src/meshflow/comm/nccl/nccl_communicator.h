// The NCCL backend (built with MESHFLOW_WITH_CUDA and MESHFLOW_WITH_MPI when NCCL is found): GPU
// tensors over NCCL, host tensors through the matching MPI group.
//
//  - Built from an MPI communicator, collectively: rank 0 makes the ncclUniqueId, MPI_Bcast shares
//    it, every rank calls ncclCommInitRank on its current CUDA device (set it first). split() and
//    sub_group() split the MPI group and build a fresh NCCL communicator over the part.
//  - Every collective runs on the communicator's own stream: an event recorded on the compute
//    stream is waited for there first (the inputs are ready), then the NCCL calls (several in one
//    ncclGroupStart/End when they form one operation: all_to_all), then a done event.
//    Work::wait() makes the compute stream wait for the done event — the host does not block — and
//    the tensors are marked used by the NCCL stream (cuda::record_stream) at launch, so the caching
//    allocator never hands their memory out before the collective has finished with it.
//  - A watchdog thread polls the outstanding operations' done events and ncclCommGetAsyncError;
//    an operation still running after timeout_seconds(), or an asynchronous NCCL error, aborts
//    the communicator (ncclCommAbort: the stuck kernels return) and every later wait() or
//    collective throws mf::Error naming the operation, its shapes, the rank and the group.
//  - Host tensors (flags, checkpoint sizes, scalars the trainer reduces) and barrier() go through
//    the MPI communicator of the same group, so the training loop needs no second group.
//  - Point-to-point: NCCL matches send and recv by order per pair of ranks, not by tag (the tag
//    is only checked and reported), and a send may wait for the peer's receive. Messages to a
//    higher rank and to a lower rank run on two NCCL communicators with their own streams, so a
//    pipeline stage sending activations up while it receives gradients from above never waits on
//    its own queue; each direction must be received in the order it was sent.
#pragma once
#include <memory>
#include <string>

#include "meshflow/comm/communicator.h"
#include "meshflow/comm/mpi/mpi_communicator.h"

namespace mf::comm {

namespace nccl_detail {
struct State;
}

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `mpi`; the calling thread's current CUDA device is this rank's GPU.
  static std::shared_ptr<NcclCommunicator> create(std::shared_ptr<MpiCommunicator> mpi);
  ~NcclCommunicator() override;
  const char* backend() const override { return "nccl"; }
  bool accepts(DeviceType type) const override { return type == DeviceType::kCUDA || type == DeviceType::kCPU; }
  // MPI_Comm_split of the MPI group, then a new NCCL communicator over each part (collective).
  CommPtr split(int color, int key) override;
  const std::shared_ptr<MpiCommunicator>& mpi() const { return mpi_; }
  // Aborts the NCCL communicators now (ncclCommAbort; local, no peer needed): later operations
  // throw naming `reason`, and destruction frees nothing collectively. For error paths, and for
  // leaving a group whose peers may be gone.
  void abort(const std::string& reason);

 protected:
  WorkPtr do_all_reduce(Tensor& inout, ReduceOp op, std::string what) override;
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, std::string what) override;
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, std::string what) override;
  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, std::string what) override;
  WorkPtr do_broadcast(Tensor& t, int root, std::string what) override;
  WorkPtr do_send(const Tensor& t, int peer, int tag, std::string what) override;
  WorkPtr do_recv(Tensor& t, int peer, int tag, std::string what) override;
  WorkPtr do_barrier(std::string what) override;
  DeviceType device_type() const override { return DeviceType::kCUDA; }

 private:
  NcclCommunicator(std::shared_ptr<MpiCommunicator> mpi, std::shared_ptr<nccl_detail::State> state);
  MpiCommunicator& host();  // the MPI group, its timeout synced with this one
  std::shared_ptr<MpiCommunicator> mpi_;
  std::shared_ptr<nccl_detail::State> state_;
};

}  // namespace mf::comm
