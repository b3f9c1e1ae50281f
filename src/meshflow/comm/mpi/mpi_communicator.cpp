// The MPI backend: nonblocking MPI calls wrapped in Work handles with a timeout, MPI datatypes and
// reduction ops per dtype (user ops for bf16/f16), communicator RAII and the MPI runtime guard.
#include "meshflow/comm/mpi/mpi_communicator.h"

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <optional>
#include <thread>

#include "meshflow/comm/watchdog.h"

namespace mf::comm {

namespace detail {
void throw_mpi_error(int rc, const char* expr, const char* file, int line, const std::string& context) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) std::snprintf(msg, sizeof msg, "MPI error %d", rc);
  ::mf::detail::throw_error(file, line,
                            (context.empty() ? std::string() : context + ": ") + "MPI call failed: " + expr +
                                " returned " + std::to_string(rc) + " (" + msg + ")");
}
}  // namespace detail

namespace {

bool mpi_finalized() {
  int fin = 0;
  MPI_Finalized(&fin);
  return fin != 0;
}

// ---- bf16 / f16: 2-byte datatypes and user reduction ops, created by the runtime.
struct HalfTypes {
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Op ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                      {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};  // [bf16, f16][ReduceOp]
};
HalfTypes g_half;
MpiRuntime* g_runtime = nullptr;

template <class H, ReduceOp R>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r = R == ReduceOp::kSum ? x + y : R == ReduceOp::kProd ? x * y : R == ReduceOp::kMin ? (x < y ? x : y)
                                                                                             : (x > y ? x : y);
    b[i] = H(r);
  }
}

template <class H>
void create_half_ops(MPI_Op* ops) {
  MF_MPI_CHECK(MPI_Op_create(&half_reduce<H, ReduceOp::kSum>, 1, &ops[0]));
  MF_MPI_CHECK(MPI_Op_create(&half_reduce<H, ReduceOp::kProd>, 1, &ops[1]));
  MF_MPI_CHECK(MPI_Op_create(&half_reduce<H, ReduceOp::kMin>, 1, &ops[2]));
  MF_MPI_CHECK(MPI_Op_create(&half_reduce<H, ReduceOp::kMax>, 1, &ops[3]));
}

MPI_Datatype mpi_dtype(DType dt) {
  switch (dt) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kBF16: return g_half.bf16;
    case DType::kF16: return g_half.f16;
    default: MF_THROW("mpi: no MPI datatype for dtype ", dtype_name(dt));
  }
}

MPI_Op mpi_op(ReduceOp op, DType dt) {
  if (dt == DType::kBF16) return g_half.ops[0][static_cast<int>(op)];
  if (dt == DType::kF16) return g_half.ops[1][static_cast<int>(op)];
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  MF_THROW("mpi: unknown reduce op");
}

int mpi_count(int64_t n, const std::string& what) {
  MF_CHECK(n <= INT_MAX, what, ": ", n, " elements exceed one MPI call's int count");
  return static_cast<int>(n);
}

// ---- Work: one MPI request, the tensors it uses, a timeout.
class MpiWork final : public Work {
 public:
  MpiWork(std::string what, std::shared_ptr<MpiCommHandle> comm, std::vector<Tensor> keep, double timeout_s,
          int64_t expected_recv_bytes = -1)
      : Work(std::move(what)),
        comm_(std::move(comm)),
        keep_(std::move(keep)),
        timeout_s_(timeout_s),
        expected_recv_bytes_(expected_recv_bytes) {}

  ~MpiWork() override {
    if (done_ || failed_ || mpi_finalized()) return;
    try {
      // MPI may still read or write the tensors: finish before releasing them. After a timeout
      // (this operation's, or any: comm::pending_timeout(), the job is going down) only test once,
      // so unwinding never blocks again; leak() then keeps the buffers without a word.
      if (timed_out_ || pending_timeout()) test(); else wait();
    } catch (...) {
    }
    if (!done_) leak();
  }

  MPI_Request* request() { return &req_; }

  bool is_completed() override {
    if (failed_) std::rethrow_exception(error_);
    return test();
  }

  void wait() override {
    if (failed_) std::rethrow_exception(error_);
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    struct Account {  // this wait's duration, however it ends
      Clock::time_point t0;
      ~Account() { add_comm_wait_seconds(std::chrono::duration<double>(Clock::now() - t0).count()); }
    } account{start};
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    std::optional<WaitNote> note;  // what the heartbeat says this rank waits in (comm/watchdog.h)
    for (int polls = 0; !test(); ++polls) {
      if (polls < 200) continue;  // short operations finish here, at full speed
      if (!note) note.emplace(description_);
      if (polls < 2000) {
        std::this_thread::yield();
        continue;
      }
      if (Clock::now() > deadline) {
        if (!timed_out_) note_pending_timeout(+1);
        timed_out_ = true;
        error_ = std::make_exception_ptr(Error(
            description_ + ": timed out after " + ::mf::detail::cat(timeout_s_) + " s waiting for the other ranks of the group (this rank is world rank " + std::to_string(world_rank()) +
            "); another rank may have died or issued a different collective (or none). The operation is still "
            "pending."));
        std::rethrow_exception(error_);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  static int world_rank() {
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }

  bool test() {
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(&req_, &flag, &status);
    if (rc == MPI_SUCCESS && flag && expected_recv_bytes_ >= 0) {
      int got = 0;
      rc = MPI_Get_count(&status, MPI_BYTE, &got);
      if (rc == MPI_SUCCESS && got != expected_recv_bytes_) {
        failed_ = true;
        keep_.clear();
        error_ = std::make_exception_ptr(Error(description_ + ": expected " + std::to_string(expected_recv_bytes_) +
                                               " bytes, the message had " + std::to_string(got)));
        std::rethrow_exception(error_);
      }
    }
    if (rc != MPI_SUCCESS) {
      failed_ = true;
      try {
        detail::throw_mpi_error(rc, "MPI_Test(request)", __FILE__, __LINE__, description_);
      } catch (...) {
        error_ = std::current_exception();
      }
      std::rethrow_exception(error_);
    }
    if (flag) {
      if (timed_out_) note_pending_timeout(-1);  // it completed after all
      done_ = true;
      keep_.clear();
      comm_.reset();
    }
    return done_;
  }

  // The request never completed: keep its buffers (and communicator) alive for good rather than
  // free memory MPI may still write into.
  void leak() {
    static auto* orphans = new std::vector<std::vector<Tensor>>();
    orphans->push_back(std::move(keep_));
    static auto* orphan_comms = new std::vector<std::shared_ptr<MpiCommHandle>>();
    orphan_comms->push_back(std::move(comm_));
    if (!pending_timeout())  // else the timeout's own message says it all
      std::fprintf(stderr, "meshflow: %s never completed; its buffers are leaked\n", description_.c_str());
  }

  std::shared_ptr<MpiCommHandle> comm_;
  std::vector<Tensor> keep_;
  double timeout_s_;
  int64_t expected_recv_bytes_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool done_ = false;
  bool failed_ = false;     // MPI reported an error: terminal
  bool timed_out_ = false;  // wait() gave up at least once; the request may still complete
};

std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group, world;
  MF_MPI_CHECK(MPI_Comm_group(comm, &group));
  MF_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> mine(n), out(n);
  for (int i = 0; i < n; ++i) mine[i] = i;
  int rc = MPI_Group_translate_ranks(group, n, mine.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  MF_MPI_CHECK(rc);
  return out;
}

}  // namespace

// ---- communicator handle and communicator

MpiCommHandle::~MpiCommHandle() {
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && !mpi_finalized())
    MPI_Comm_free(&comm_);  // pending operations still complete: MPI frees it after them
}

MpiCommunicator::MpiCommunicator(std::shared_ptr<MpiCommHandle> handle, int rank, int size,
                                 std::vector<int> world_ranks)
    : Communicator(rank, size, std::move(world_ranks)), handle_(std::move(handle)) {}

std::shared_ptr<MpiCommunicator> MpiCommunicator::adopt(MPI_Comm comm) {
  MF_CHECK(comm != MPI_COMM_NULL, "MpiCommunicator::adopt: MPI_COMM_NULL");
  auto handle = std::make_shared<MpiCommHandle>(comm);
  MF_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  MF_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MF_MPI_CHECK(MPI_Comm_size(comm, &size));
  return std::shared_ptr<MpiCommunicator>(new MpiCommunicator(std::move(handle), rank, size, world_ranks_of(comm)));
}

CommPtr MpiCommunicator::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  MF_MPI_CHECK(MPI_Comm_split(mpi_comm(), color < 0 ? MPI_UNDEFINED : color, key, &out), "split(color ", color,
               ", key ", key, ") on rank ", rank(), " of ", group_str());
  if (out == MPI_COMM_NULL) return nullptr;
  auto sub = adopt(out);
  sub->set_timeout_seconds(timeout_seconds());
  return sub;
}

namespace {
template <class Issue>
WorkPtr issue(std::string what, const std::shared_ptr<MpiCommHandle>& comm, std::vector<Tensor> keep, double timeout,
              Issue&& call, int64_t expected_recv_bytes = -1) {
  auto work = std::make_shared<MpiWork>(std::move(what), comm, std::move(keep), timeout, expected_recv_bytes);
  MF_MPI_CHECK(call(work->request()), work->description());
  return work;
}
}  // namespace

WorkPtr MpiCommunicator::do_all_reduce(Tensor& t, ReduceOp op, std::string what) {
  const int n = mpi_count(t.numel(), what);
  MPI_Datatype dt = mpi_dtype(t.dtype());
  MPI_Op mop = mpi_op(op, t.dtype());
  void* p = t.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {t}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, p, n, dt, mop, c, r); });
}

WorkPtr MpiCommunicator::do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op, std::string what) {
  const int n = mpi_count(out.numel(), what);
  MPI_Datatype dt = mpi_dtype(in.dtype());
  MPI_Op mop = mpi_op(op, in.dtype());
  void *src = in.raw_data(), *dst = out.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {in, out}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(src, dst, n, dt, mop, c, r); });
}

WorkPtr MpiCommunicator::do_all_gather(const Tensor& in, Tensor& out, std::string what) {
  const int n = mpi_count(in.numel(), what);
  MPI_Datatype dt = mpi_dtype(in.dtype());
  void *src = in.raw_data(), *dst = out.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {in, out}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Iallgather(src, n, dt, dst, n, dt, c, r); });
}

WorkPtr MpiCommunicator::do_all_to_all(const Tensor& in, Tensor& out, std::string what) {
  const int n = mpi_count(in.numel() / size(), what);
  MPI_Datatype dt = mpi_dtype(in.dtype());
  void *src = in.raw_data(), *dst = out.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {in, out}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Ialltoall(src, n, dt, dst, n, dt, c, r); });
}

WorkPtr MpiCommunicator::do_broadcast(Tensor& t, int root, std::string what) {
  const int n = mpi_count(t.numel(), what);
  MPI_Datatype dt = mpi_dtype(t.dtype());
  void* p = t.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {t}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Ibcast(p, n, dt, root, c, r); });
}

WorkPtr MpiCommunicator::do_send(const Tensor& t, int peer, int tag, std::string what) {
  const int n = mpi_count(t.numel(), what);
  MPI_Datatype dt = mpi_dtype(t.dtype());
  void* p = t.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {t}, timeout_seconds(),
               [&](MPI_Request* r) { return MPI_Isend(p, n, dt, peer, tag, c, r); });
}

WorkPtr MpiCommunicator::do_recv(Tensor& t, int peer, int tag, std::string what) {
  const int n = mpi_count(t.numel(), what);
  MPI_Datatype dt = mpi_dtype(t.dtype());
  void* p = t.raw_data();
  MPI_Comm c = mpi_comm();
  return issue(
      std::move(what), handle_, {t}, timeout_seconds(),
      [&](MPI_Request* r) { return MPI_Irecv(p, n, dt, peer, tag, c, r); }, static_cast<int64_t>(t.nbytes()));
}

WorkPtr MpiCommunicator::do_barrier(std::string what) {
  MPI_Comm c = mpi_comm();
  return issue(std::move(what), handle_, {}, timeout_seconds(), [&](MPI_Request* r) { return MPI_Ibarrier(c, r); });
}

// ---- runtime

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  MF_CHECK(g_runtime == nullptr, "MpiRuntime: an MPI runtime is already live in this process");
  // Large malloc blocks stay in the heap instead of being mapped and unmapped per call: Open
  // MPI's reduce-scatter takes a temporary of the whole message, and from 16 MB on (glibc's
  // mapping threshold) each call page-faults it fresh — 24 MB over 8 ranks took 480 ms instead of
  // 25 ms. Tensors are not affected (their allocator maps large blocks itself and caches them).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  int initialized = 0;
  MF_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    MF_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &thread_level_));
    owns_init_ = true;
  } else {
    MF_MPI_CHECK(MPI_Query_thread(&thread_level_));
  }
  MF_CHECK(thread_level_ >= MPI_THREAD_FUNNELED, "MpiRuntime: MPI provides thread level ", thread_level_,
           ", meshflow needs MPI_THREAD_FUNNELED or higher");
  MF_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &g_half.bf16));
  MF_MPI_CHECK(MPI_Type_commit(&g_half.bf16));
  MF_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &g_half.f16));
  MF_MPI_CHECK(MPI_Type_commit(&g_half.f16));
  create_half_ops<BFloat16>(g_half.ops[0]);
  create_half_ops<Float16>(g_half.ops[1]);
  MPI_Comm world = MPI_COMM_NULL;
  MF_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  world_ = MpiCommunicator::adopt(world);
  g_runtime = this;
}

MpiRuntime::~MpiRuntime() {
  g_runtime = nullptr;
  world_.reset();
  if (mpi_finalized()) return;
  for (auto& row : g_half.ops)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
  if (g_half.bf16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_half.bf16);
  if (g_half.f16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_half.f16);
  if (owns_init_) MPI_Finalize();
}

MpiRuntime mpi_init(int& argc, char**& argv) { return MpiRuntime(&argc, &argv); }

CommPtr mpi_world() {
  MF_CHECK(g_runtime != nullptr, "mpi_world: no live MpiRuntime (create one with mf::comm::mpi_init first)");
  return g_runtime->world();
}

}  // namespace mf::comm
