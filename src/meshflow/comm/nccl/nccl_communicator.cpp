// The NCCL backend: communicator set-up over MPI, stream and event hand-offs, the watchdog.
#include "meshflow/comm/nccl/nccl_communicator.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <thread>

#include "meshflow/cuda/allocator.h"
#include "meshflow/cuda/runtime.h"

namespace mf::comm {

namespace nccl_detail {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_nccl_error(ncclResult_t rc, ncclComm_t comm, const char* expr, const std::string& what,
                                   const char* file, int line) {
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  ::mf::detail::throw_error(file, line,
                            ::mf::detail::cat(what, ": ", expr, " failed: ", ncclGetErrorString(rc),
                                              last && *last ? std::string(" (") + last + ")" : std::string()));
}

// MF_NCCL_CHECK(ncclXxx(...), the communicator or nullptr, description): throws naming all three.
#define MF_NCCL_CHECK(expr, nccl_comm, what_str)                                                             \
  do {                                                                                                     \
    ncclResult_t mf_nccl_rc_ = (expr);                                                                     \
    if (mf_nccl_rc_ != ncclSuccess && mf_nccl_rc_ != ncclInProgress)                                       \
      ::mf::comm::nccl_detail::throw_nccl_error(mf_nccl_rc_, nccl_comm, #expr, what_str, __FILE__, __LINE__); \
  } while (0)

// One launched operation as the watchdog sees it: its done event and deadline.
struct Pending {
  std::string what;
  cudaEvent_t done = nullptr;
  double timeout_s = 0;
  Clock::time_point deadline;  // launch + timeout_s (the time queued behind compute counts too)
  ~Pending() {
    if (done) cudaEventDestroy(done);  // released by the driver once the event has completed
  }
};

// One NCCL communicator over the group and the stream its operations run on.
struct Channel {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// The NCCL communicators, their streams and the watchdog; shared by the communicator and its
// works. Channel 0 carries the collectives and point-to-point messages to a higher rank; channel
// 1 (groups of 2 or more) messages to a lower rank. NCCL matches a pair's sends and receives in
// the order of its stream, and a send may wait until the peer's receive runs: with one stream,
// pipeline stages that send activations up while receiving gradients from above would each wait
// for the other's queue. Split by direction, each stream's messages form a chain that always
// drains.
struct State {
  Channel ch[2];
  int device = 0;
  std::string where;  // "rank 1 of group [0, 1] (nccl)"

  std::mutex mu;
  std::condition_variable cv;
  std::list<std::shared_ptr<Pending>> pending;  // guarded by mu
  std::string abort_reason;                     // guarded by mu; non-empty once aborted
  std::atomic<bool> aborted{false};
  bool stop = false;  // guarded by mu
  std::thread watchdog;

  // Ends the watchdog thread (called from other threads only).
  void stop_watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
  }

  ~State() {
    // Drain under the watchdog first: an operation no peer will match (this rank is unwinding
    // from an error) times out and aborts instead of blocking the synchronisation below forever.
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (pending.empty() || aborted.load()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop_watchdog();
    if (!aborted.load()) {
      // Normal end: let the streams drain, then free the communicators.
      cudaSetDevice(device);
      for (Channel& c : ch) {
        if (c.stream) cudaStreamSynchronize(c.stream);
        if (c.comm) ncclCommDestroy(c.comm);
      }
    }
    // The streams are left to the process's end: an aborted communicator's kernels may still
    // reference them, and a stream per communicator is cheap.
  }

  // Throws the abort's reason (the first failure) for `what`.
  void throw_if_aborted(const std::string& what) {
    if (!aborted.load()) return;
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mu);
      reason = abort_reason;
    }
    MF_THROW(what, ": the NCCL communicator of ", where, " was aborted: ", reason);
  }

  // Marks the communicator failed and aborts its NCCL communicators (the first reason wins). The
  // watchdog reports it at once on stderr: the main thread may be busy elsewhere.
  void abort_with(const std::string& reason, bool report) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!abort_reason.empty()) return;
      abort_reason = reason;
    }
    if (report) std::fprintf(stderr, "meshflow: nccl watchdog: %s\n", reason.c_str());
    aborted.store(true);
    for (Channel& c : ch)
      if (c.comm) ncclCommAbort(c.comm);  // the stuck kernels return; the handles are dead from here on
  }

  void watch() {
    cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (stop || aborted.load()) break;
      std::string failure;
      const Clock::time_point now = Clock::now();
      for (auto it = pending.begin(); it != pending.end();) {
        const cudaError_t q = cudaEventQuery((*it)->done);
        if (q == cudaSuccess) {
          it = pending.erase(it);
          continue;
        }
        if (q != cudaErrorNotReady) {
          cudaGetLastError();
          failure = ::mf::detail::cat((*it)->what, ": CUDA error while the collective ran: ", cudaGetErrorString(q));
          break;
        }
        if (now > (*it)->deadline) {
          failure = ::mf::detail::cat((*it)->what, ": not finished ", (*it)->timeout_s,
                                      " s after it was issued (train.dist.timeout); another rank may have died or issued "
                                      "a different collective (or none); the NCCL communicator is aborted");
          break;
        }
        ++it;
      }
      for (const Channel& c : ch) {
        ncclResult_t async = ncclSuccess;
        if (failure.empty() && c.comm && ncclCommGetAsyncError(c.comm, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress)
          failure = ::mf::detail::cat("NCCL reported an asynchronous error on ", where, ": ", ncclGetErrorString(async));
      }
      if (!failure.empty()) {
        lock.unlock();
        abort_with(failure, true);
        lock.lock();
        break;
      }
    }
  }
};

ncclDataType_t nccl_dtype(DType dt) {
  switch (dt) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    default: MF_THROW("nccl: no NCCL datatype for dtype ", dtype_name(dt));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
  }
  MF_THROW("nccl: unknown reduce op");
}

// A launched NCCL operation.
class NcclWork final : public Work {
 public:
  NcclWork(std::string what, std::shared_ptr<State> state, std::shared_ptr<Pending> pending, std::vector<Tensor> keep)
      : Work(std::move(what)), state_(std::move(state)), pending_(std::move(pending)), keep_(std::move(keep)) {}

  void wait() override {
    if (error_) std::rethrow_exception(error_);
    try {
      state_->throw_if_aborted(description_);
      // The compute stream (of this thread's device: the communicator's) continues after the
      // collective; the host goes on at once.
      MF_CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(), pending_->done, 0));
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    keep_.clear();  // the allocator knows the NCCL stream used them (record_stream at launch)
  }

  bool is_completed() override {
    if (error_) std::rethrow_exception(error_);
    try {
      state_->throw_if_aborted(description_);
      const cudaError_t q = cudaEventQuery(pending_->done);
      if (q == cudaErrorNotReady) return false;
      MF_CUDA_CHECK(q);
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    return true;
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Pending> pending_;
  std::vector<Tensor> keep_;
};

// Runs `issue(comm, stream)` (the NCCL calls) on channel `channel`'s stream after the compute
// stream's work so far, and returns the Work of it.
template <class Issue>
WorkPtr launch(const std::shared_ptr<State>& s, int channel, std::string what, std::vector<Tensor> keep,
               double timeout_s, Issue&& issue) {
  MF_CHECK(s->ch[channel].comm != nullptr, what, ": no NCCL channel ", channel, " on ", s->where);
  const Channel& ch = s->ch[channel];
  s->throw_if_aborted(what);
  MF_CHECK(cuda::current_device() == s->device, what, ": called with cuda:", cuda::current_device(),
           " current, but the communicator lives on cuda:", s->device);
  for (const Tensor& t : keep)
    MF_CHECK(t.device() == cuda_device(s->device), what, ": tensor ", t.str(), " is not on this rank's GPU cuda:",
             s->device);
  cudaEvent_t ready = nullptr;
  MF_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  auto pending = std::make_shared<Pending>();
  pending->what = what;
  pending->timeout_s = timeout_s;
  try {
    MF_CUDA_CHECK(cudaEventRecord(ready, cuda::compute_stream()));
    MF_CUDA_CHECK(cudaStreamWaitEvent(ch.stream, ready, 0));
    MF_CUDA_CHECK(cudaEventCreateWithFlags(&pending->done, cudaEventDisableTiming));
    issue(ch.comm, ch.stream);
    MF_CUDA_CHECK(cudaEventRecord(pending->done, ch.stream));
  } catch (...) {
    cudaEventDestroy(ready);
    throw;
  }
  cudaEventDestroy(ready);
  // The allocator knows blocks by their start: a view (a bucket slot, a ZeRO slice) names its
  // storage's block.
  for (const Tensor& t : keep)
    if (t.nbytes() > 0) cuda::record_stream(t.impl()->storage->data(), ch.stream);
  pending->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->pending.push_back(pending);
  }
  return std::make_shared<NcclWork>(std::move(what), s, std::move(pending), std::move(keep));
}

size_t count_of(const Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace nccl_detail

using namespace nccl_detail;

NcclCommunicator::NcclCommunicator(std::shared_ptr<MpiCommunicator> mpi, std::shared_ptr<State> state)
    : Communicator(mpi->rank(), mpi->size(), mpi->world_ranks()), mpi_(std::move(mpi)), state_(std::move(state)) {
  set_timeout_seconds(mpi_->timeout_seconds());
}

NcclCommunicator::~NcclCommunicator() = default;

std::shared_ptr<NcclCommunicator> NcclCommunicator::create(std::shared_ptr<MpiCommunicator> mpi) {
  MF_CHECK(mpi != nullptr, "NcclCommunicator::create: no MPI communicator");
  const std::string where = ::mf::detail::cat("rank ", mpi->rank(), " of ", mpi->group_str(), " (nccl)");
  MF_CHECK(cuda::device_count() > 0, "nccl: no CUDA device is visible on ", where);
  auto s = std::make_shared<State>();
  s->device = cuda::current_device();
  s->where = where;
  const int channels = mpi->size() > 1 ? 2 : 1;  // one rank sends nothing
  for (int k = 0; k < channels; ++k) {
    ncclUniqueId id{};
    if (mpi->rank() == 0) MF_NCCL_CHECK(ncclGetUniqueId(&id), nullptr, "nccl set-up on " + where);
    MF_MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, mpi->mpi_comm()),
                 "nccl set-up: sharing the ncclUniqueId on ", where);
    MF_NCCL_CHECK(ncclCommInitRank(&s->ch[k].comm, mpi->size(), id, mpi->rank()), nullptr,
                  "ncclCommInitRank on " + where);
    MF_CUDA_CHECK(cudaStreamCreateWithFlags(&s->ch[k].stream, cudaStreamNonBlocking));
  }
  State* raw = s.get();
  s->watchdog = std::thread([raw] { raw->watch(); });
  return std::shared_ptr<NcclCommunicator>(new NcclCommunicator(std::move(mpi), std::move(s)));
}

CommPtr NcclCommunicator::split(int color, int key) {
  mpi_->set_timeout_seconds(timeout_seconds());
  CommPtr sub = mpi_->split(color, key);
  if (!sub) return nullptr;
  auto mpi_sub = std::dynamic_pointer_cast<MpiCommunicator>(sub);
  MF_CHECK(mpi_sub != nullptr, "nccl split: the MPI split returned another backend");
  auto out = create(std::move(mpi_sub));
  out->set_timeout_seconds(timeout_seconds());
  return out;
}

void NcclCommunicator::abort(const std::string& reason) {
  state_->stop_watchdog();  // no NCCL call of the watchdog's may overlap the abort
  state_->abort_with(reason, false);
}

MpiCommunicator& NcclCommunicator::host() {
  mpi_->set_timeout_seconds(timeout_seconds());
  return *mpi_;
}

namespace {
bool on_host(const Tensor& t) { return t.device().type == DeviceType::kCPU; }

void check_same_side(const char* op, const Tensor& in, const Tensor& out, const std::string& what) {
  MF_CHECK(on_host(in) == on_host(out), op, ": in ", in.str(), " and out ", out.str(),
           " must both be on the host or both on the GPU (", what, ")");
}
}  // namespace

WorkPtr NcclCommunicator::do_all_reduce(Tensor& t, ReduceOp op, std::string what) {
  if (on_host(t)) return host().all_reduce(t, op);
  void* p = t.raw_data();
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  const size_t n = count_of(t);
  const std::string w = what;
  return launch(state_, 0, std::move(what), {t}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclAllReduce(p, p, n, dt, nccl_op(op), c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, std::string what) {
  check_same_side("reduce_scatter", in, out, what);
  if (on_host(in)) return host().reduce_scatter(in, out, op);
  const void* src = in.raw_data();
  void* dst = out.raw_data();
  const ncclDataType_t dt = nccl_dtype(in.dtype());
  const size_t n = count_of(out);
  const std::string w = what;
  return launch(state_, 0, std::move(what), {in, out}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclReduceScatter(src, dst, n, dt, nccl_op(op), c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_all_gather(const Tensor& in, Tensor& out, std::string what) {
  check_same_side("all_gather", in, out, what);
  if (on_host(in)) return host().all_gather(in, out);
  const void* src = in.raw_data();
  void* dst = out.raw_data();
  const ncclDataType_t dt = nccl_dtype(in.dtype());
  const size_t n = count_of(in);
  const std::string w = what;
  return launch(state_, 0, std::move(what), {in, out}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclAllGather(src, dst, n, dt, c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_all_to_all(const Tensor& in, Tensor& out, std::string what) {
  check_same_side("all_to_all", in, out, what);
  if (on_host(in)) return host().all_to_all(in, out);
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const ncclDataType_t dt = nccl_dtype(in.dtype());
  const int n = size();
  const size_t chunk = count_of(in) / static_cast<size_t>(n);
  const size_t chunk_bytes = chunk * dtype_nbytes(in.dtype());
  const std::string w = what;
  return launch(state_, 0, std::move(what), {in, out}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    // One group: every pair's send and recv are matched together, so none waits on another.
    MF_NCCL_CHECK(ncclGroupStart(), c, w);
    ncclResult_t rc = ncclSuccess;
    for (int j = 0; j < n && rc == ncclSuccess; ++j) {
      rc = ncclSend(src + j * chunk_bytes, chunk, dt, j, c, st);
      if (rc == ncclSuccess) rc = ncclRecv(dst + j * chunk_bytes, chunk, dt, j, c, st);
    }
    const ncclResult_t end = ncclGroupEnd();
    MF_NCCL_CHECK(rc, c, w);
    MF_NCCL_CHECK(end, c, w);
  });
}

WorkPtr NcclCommunicator::do_broadcast(Tensor& t, int root, std::string what) {
  if (on_host(t)) return host().broadcast(t, root);
  void* p = t.raw_data();
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  const size_t n = count_of(t);
  const std::string w = what;
  return launch(state_, 0, std::move(what), {t}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclBroadcast(p, p, n, dt, root, c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_send(const Tensor& t, int peer, int tag, std::string what) {
  if (on_host(t)) return host().send(t, peer, tag);
  const void* p = t.raw_data();
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  const size_t n = count_of(t);
  const std::string w = what;
  const int channel = peer > rank() || size() == 1 ? 0 : 1;  // up or down (see State)
  return launch(state_, channel, std::move(what), {t}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclSend(p, n, dt, peer, c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_recv(Tensor& t, int peer, int tag, std::string what) {
  if (on_host(t)) return host().recv(t, peer, tag);
  void* p = t.raw_data();
  const ncclDataType_t dt = nccl_dtype(t.dtype());
  const size_t n = count_of(t);
  const std::string w = what;
  const int channel = peer < rank() || size() == 1 ? 0 : 1;  // the message goes up or down (see State)
  return launch(state_, channel, std::move(what), {t}, timeout_seconds(), [&](ncclComm_t c, cudaStream_t st) {
    MF_NCCL_CHECK(ncclRecv(p, n, dt, peer, c, st), c, w);
  });
}

WorkPtr NcclCommunicator::do_barrier(std::string what) {
  // A host barrier: callers use it to order file system work between ranks.
  state_->throw_if_aborted(what);
  return host().barrier();
}

}  // namespace mf::comm
