// The communicator interface: a group of ranks and the collectives among them. Backends (MPI for
// host tensors; NCCL for GPU tensors, host ones through its MPI group) implement the protected
// do_* hooks; this base class owns everything that must not differ between backends: argument
// checks (op, shapes, dtype, rank, group in every message), byte accounting and the timeout
// setting.
//
// Every operation is asynchronous and returns a Work handle. The handle keeps the tensors it
// reads or writes alive until the operation completes; the caller must not touch (write, or for
// outputs read) those tensors before wait() returns or is_completed() is true.
//
// Ordering rule (as for NCCL and MPI): every member of a group must issue the same collectives
// on that group in the same order. A rank that issues a different one, or none, leaves the
// others waiting; Work::wait() turns that into an mf::Error after timeout_seconds().
#pragma once
#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "meshflow/tensor/tensor.h"

namespace mf::comm {

enum class ReduceOp : uint8_t { kSum = 0, kProd, kMin, kMax };
const char* reduce_op_name(ReduceOp op);

enum class OpKind : uint8_t {
  kAllReduce = 0,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
};
inline constexpr int kNumOpKinds = 8;
const char* op_kind_name(OpKind kind);  // "all_reduce", "reduce_scatter", ...

// Per-communicator counters. bytes_sent are the *algorithmic* bytes this rank sends under the
// standard ring schedule — the accounting NCCL's tests and Megatron use for bus bandwidth —
// not what a backend actually puts on the wire (MPI may pick a tree or recursive doubling).
// With N ranks and a tensor of nbytes:
//   all_reduce      2(N-1)/N * nbytes   (reduce-scatter then all-gather; rounded down)
//   reduce_scatter  (N-1)/N * in.nbytes   = (N-1) * out.nbytes
//   all_gather      (N-1)/N * out.nbytes  = (N-1) * in.nbytes
//   all_to_all      (N-1)/N * in.nbytes   (the chunk for itself stays local)
//   broadcast       nbytes on the root, 0 elsewhere
//   send            nbytes;  recv, barrier: 0
// A group of one rank sends nothing. calls counts every operation issued.
struct CommStats {
  std::array<uint64_t, kNumOpKinds> bytes_sent{};
  std::array<uint64_t, kNumOpKinds> calls{};
  uint64_t bytes(OpKind kind) const { return bytes_sent[static_cast<int>(kind)]; }
  uint64_t count(OpKind kind) const { return calls[static_cast<int>(kind)]; }
  uint64_t total_bytes() const;
};

// Handle to one asynchronous operation.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation completes. Throws mf::Error when it fails or when it has not
  // completed after the communicator's timeout; the operation then stays pending (see the
  // backend for what that means) and error() returns the exception.
  virtual void wait() = 0;
  // Non-blocking test; true once complete. Throws on failure.
  virtual bool is_completed() = 0;
  std::exception_ptr error() const { return error_; }
  // "all_reduce f32(8,) on rank 1 of group [0, 1]" — used in every error message.
  const std::string& description() const { return description_; }

 protected:
  explicit Work(std::string description) : description_(std::move(description)) {}
  std::exception_ptr error_;
  std::string description_;
};

using WorkPtr = std::shared_ptr<Work>;

// Seconds this process has spent blocked in Work::wait, over every communicator (backends add
// each wait's duration): a step's compute time is its wall time less the change in this.
double comm_wait_seconds();
void add_comm_wait_seconds(double seconds);

// Whether some wait of this process timed out on an operation that has not completed since: the
// job is most likely going down. Teardown code (destructors finishing pending operations) then
// tests once instead of waiting a full timeout again. Backends count with note_pending_timeout:
// +1 when an operation's wait first times out, -1 when such an operation completes after all.
bool pending_timeout();
void note_pending_timeout(int delta);
// For destructors: lets `w` finish (a pending collective still writes its buffers), or only tests
// it once while pending_timeout() (the job is going down: no second timeout). Never throws: a
// failed or timed-out operation leaves nothing more to do.
void finish_for_teardown(Work& w) noexcept;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }  // in this group, 0 .. size()-1
  int size() const { return size_; }
  // The members' ranks in the world communicator, indexed by rank in this group.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  std::string group_str() const;  // "group [0, 2] (world ranks)"
  virtual const char* backend() const = 0;
  // Whether tensors on devices of `type` may be passed: the backend's device type, and for the
  // NCCL backend also host tensors (which it sends through its MPI group).
  virtual bool accepts(DeviceType type) const { return type == device_type(); }

  // ---- collectives. Tensors: contiguous, dtype f32/f64/bf16/f16/i32/i64, on a device type
  // accepts() takes; checks throw mf::Error naming op, shapes, dtype, rank and group.
  // inout holds this rank's contribution and receives the reduction over all ranks.
  WorkPtr all_reduce(Tensor& inout, ReduceOp op = ReduceOp::kSum);
  // in (size*m, ...) -> out (m, ...): out = rank's m-row block of the sum over ranks.
  WorkPtr reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::kSum);
  // in (m, ...) -> out (size*m, ...): block r of out is rank r's in.
  WorkPtr all_gather(const Tensor& in, Tensor& out);
  // in, out (size*m, ...): block j of in goes to rank j; block i of out came from rank i.
  WorkPtr all_to_all(const Tensor& in, Tensor& out);
  // The root's tensor is copied into every rank's tensor (same shape and dtype everywhere).
  WorkPtr broadcast(Tensor& t, int root);
  // Point to point; peer is a rank in this group, tag in [0, 32767].
  WorkPtr send(const Tensor& t, int peer, int tag);
  WorkPtr recv(Tensor& t, int peer, int tag);
  WorkPtr barrier();

  // ---- groups (collective over every rank of this communicator; all must call it).
  // Ranks with equal color form a group, ordered by (key, rank); color < 0 gets nullptr.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;
  // A group of the listed ranks of this communicator, in that order; non-members get nullptr.
  // Every rank must pass the same list.
  std::shared_ptr<Communicator> sub_group(const std::vector<int>& ranks);

  // ---- timeout for Work::wait() of operations issued from now on (default 600 s).
  void set_timeout_seconds(double seconds);
  double timeout_seconds() const { return timeout_seconds_; }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  Communicator(int rank, int size, std::vector<int> world_ranks);
  // Hooks: called after the checks and the byte accounting. `what` is the description.
  virtual WorkPtr do_all_reduce(Tensor& inout, ReduceOp op, std::string what) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, std::string what) = 0;
  virtual WorkPtr do_all_gather(const Tensor& in, Tensor& out, std::string what) = 0;
  virtual WorkPtr do_all_to_all(const Tensor& in, Tensor& out, std::string what) = 0;
  virtual WorkPtr do_broadcast(Tensor& t, int root, std::string what) = 0;
  virtual WorkPtr do_send(const Tensor& t, int peer, int tag, std::string what) = 0;
  virtual WorkPtr do_recv(Tensor& t, int peer, int tag, std::string what) = 0;
  virtual WorkPtr do_barrier(std::string what) = 0;
  virtual DeviceType device_type() const = 0;

 private:
  std::string where() const;  // "rank 1 of group [0, 1]"
  void check_tensor(const char* op, const char* name, const Tensor& t) const;
  void check_disjoint(const char* op, const Tensor& in, const Tensor& out) const;
  void check_peer(const char* op, const char* what, int peer) const;
  void count(OpKind kind, uint64_t bytes);
  // With profiling on (core/trace.h): `work` wrapped to record its span; else `work` itself.
  WorkPtr traced(WorkPtr work);

  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  double timeout_seconds_ = 600.0;
  CommStats stats_;
  OpKind last_kind_ = OpKind::kBarrier;  // of the operation being issued (for traced())
  uint64_t last_bytes_ = 0;
};

using CommPtr = std::shared_ptr<Communicator>;

}  // namespace mf::comm
