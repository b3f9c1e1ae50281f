// Backend-independent half of every communicator: argument checks, byte accounting, groups.
#include "meshflow/comm/communicator.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "meshflow/core/trace.h"

namespace mf::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kBarrier: return "barrier";
  }
  return "?";
}

namespace {
std::atomic<int64_t> g_wait_ns{0};
std::atomic<int> g_pending_timeouts{0};
}  // namespace

bool pending_timeout() { return g_pending_timeouts.load() > 0; }
void note_pending_timeout(int delta) { g_pending_timeouts.fetch_add(delta); }

void finish_for_teardown(Work& w) noexcept {
  try {
    if (pending_timeout()) w.is_completed(); else w.wait();
  } catch (...) {
  }
}

double comm_wait_seconds() { return static_cast<double>(g_wait_ns.load(std::memory_order_relaxed)) * 1e-9; }
void add_comm_wait_seconds(double seconds) {
  g_wait_ns.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

uint64_t CommStats::total_bytes() const {
  uint64_t s = 0;
  for (uint64_t b : bytes_sent) s += b;
  return s;
}

namespace {
std::string tstr(const Tensor& t) { return std::string(dtype_name(t.dtype())) + shape_str(t.shape()); }
}  // namespace

Communicator::Communicator(int rank, int size, std::vector<int> world_ranks)
    : rank_(rank), size_(size), world_ranks_(std::move(world_ranks)) {
  MF_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_ && static_cast<int>(world_ranks_.size()) == size_,
           "Communicator: rank ", rank_, " size ", size_, " with ", world_ranks_.size(), " world ranks");
}

std::string Communicator::group_str() const {
  std::string s = "group [";
  for (size_t i = 0; i < world_ranks_.size(); ++i) s += (i ? ", " : "") + std::to_string(world_ranks_[i]);
  return s + "]";
}

std::string Communicator::where() const {
  return "rank " + std::to_string(rank_) + " of " + group_str() + " (" + backend() + ")";
}

void Communicator::set_timeout_seconds(double seconds) {
  MF_CHECK(seconds > 0 && std::isfinite(seconds), "set_timeout_seconds: ", seconds, " must be positive (", where(),
           ")");
  timeout_seconds_ = seconds;
}

void Communicator::check_tensor(const char* op, const char* name, const Tensor& t) const {
  MF_CHECK(t.defined(), op, ": ", name, " is an undefined tensor (", where(), ")");
  DType dt = t.dtype();
  MF_CHECK(dt == DType::kF32 || dt == DType::kF64 || dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kI32 ||
               dt == DType::kI64,
           op, ": ", name, " ", tstr(t), " has dtype ", dtype_name(dt),
           "; communication supports f32, f64, bf16, f16, i32, i64 (", where(), ")");
  MF_CHECK(t.is_contiguous(), op, ": ", name, " ", tstr(t), " is not contiguous; call contiguous() first (", where(),
           ")");
  MF_CHECK(accepts(t.device().type), op, ": ", name, " ", tstr(t), " is on ", t.device().str(), "; the ",
           backend(), " backend needs ", (device_type() == DeviceType::kCPU ? "cpu" : "cuda"), " tensors (", where(),
           ")");
}

void Communicator::check_disjoint(const char* op, const Tensor& in, const Tensor& out) const {
  auto a = static_cast<const char*>(in.raw_data()), b = static_cast<const char*>(out.raw_data());
  bool overlap = in.nbytes() > 0 && out.nbytes() > 0 && a < b + out.nbytes() && b < a + in.nbytes();
  MF_CHECK(!overlap, op, ": in ", tstr(in), " and out ", tstr(out), " overlap in memory (", where(), ")");
}

void Communicator::check_peer(const char* op, const char* what, int peer) const {
  MF_CHECK(peer >= 0 && peer < size_, op, ": ", what, " ", peer, " is not a rank of ", group_str(), " (size ", size_,
           "; ", where(), ")");
}

void Communicator::count(OpKind kind, uint64_t bytes) {
  stats_.calls[static_cast<int>(kind)] += 1;
  stats_.bytes_sent[static_cast<int>(kind)] += size_ > 1 ? bytes : 0;
  last_kind_ = kind;
  last_bytes_ = size_ > 1 ? bytes : 0;
}

namespace {
// A profiled operation (train.profile): its span from issue to the completion this rank observes
// (an asynchronous track), and each wait for it on the waiting thread's track.
class TracedWork : public Work {
 public:
  TracedWork(WorkPtr inner, std::string name, std::string args)
      : Work(inner->description()), inner_(std::move(inner)), name_(std::move(name)), args_(std::move(args)),
        issued_ns_(trace::now_ns()) {}
  void wait() override {
    const int64_t t0 = trace::now_ns();
    try {
      inner_->wait();
    } catch (...) {
      error_ = inner_->error() ? inner_->error() : std::current_exception();
      throw;
    }
    const int64_t t1 = trace::now_ns();
    trace::add_span("comm_wait", "wait " + name_, t0, t1, args_);
    completed(t1);
  }
  bool is_completed() override {
    const bool done = inner_->is_completed();
    if (done) completed(trace::now_ns());
    return done;
  }

 private:
  void completed(int64_t at_ns) {
    if (recorded_) return;
    recorded_ = true;
    trace::add_span("comm", name_, issued_ns_, at_ns, args_, true);
  }
  WorkPtr inner_;
  std::string name_, args_;
  int64_t issued_ns_;
  bool recorded_ = false;
};
}  // namespace

WorkPtr Communicator::traced(WorkPtr work) {
  if (!trace::enabled() || !work) return work;
  std::string group = group_str().substr(6);  // "[0, 2]"
  std::string args = "\"group\":" + trace::json_string(group) + ",\"bytes\":" + std::to_string(last_bytes_) +
                     ",\"description\":" + trace::json_string(work->description());
  return std::make_shared<TracedWork>(std::move(work), op_kind_name(last_kind_), std::move(args));
}

WorkPtr Communicator::all_reduce(Tensor& inout, ReduceOp op) {
  check_tensor("all_reduce", "tensor", inout);
  const uint64_t n = size_, nbytes = inout.nbytes();
  count(OpKind::kAllReduce, 2 * (n - 1) * nbytes / n);
  return traced(do_all_reduce(inout, op,
                       std::string("all_reduce(") + reduce_op_name(op) + ") " + tstr(inout) + " on " + where()));
}

namespace {
// Shapes equal except axis 0, where `big` has `factor` times the rows of `small`.
bool blocks_match(const Tensor& big, const Tensor& small, int64_t factor) {
  if (big.ndim() < 1 || big.ndim() != small.ndim()) return false;
  if (big.shape(0) != factor * small.shape(0)) return false;
  for (int64_t d = 1; d < big.ndim(); ++d)
    if (big.shape(d) != small.shape(d)) return false;
  return true;
}
}  // namespace

WorkPtr Communicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check_tensor("reduce_scatter", "in", in);
  check_tensor("reduce_scatter", "out", out);
  check_disjoint("reduce_scatter", in, out);
  MF_CHECK(in.dtype() == out.dtype(), "reduce_scatter: dtype mismatch: in ", tstr(in), " vs out ", tstr(out), " (",
           where(), ")");
  MF_CHECK(blocks_match(in, out, size_), "reduce_scatter: in ", tstr(in), " must be size (", size_, ") x out ",
           tstr(out), " along axis 0 (", where(), ")");
  count(OpKind::kReduceScatter, static_cast<uint64_t>(size_ - 1) * out.nbytes());
  return traced(do_reduce_scatter(in, out, op,
                           std::string("reduce_scatter(") + reduce_op_name(op) + ") " + tstr(in) + " -> " +
                               tstr(out) + " on " + where()));
}

WorkPtr Communicator::all_gather(const Tensor& in, Tensor& out) {
  check_tensor("all_gather", "in", in);
  check_tensor("all_gather", "out", out);
  check_disjoint("all_gather", in, out);
  MF_CHECK(in.dtype() == out.dtype(), "all_gather: dtype mismatch: in ", tstr(in), " vs out ", tstr(out), " (",
           where(), ")");
  MF_CHECK(blocks_match(out, in, size_), "all_gather: out ", tstr(out), " must be size (", size_, ") x in ",
           tstr(in), " along axis 0 (", where(), ")");
  count(OpKind::kAllGather, static_cast<uint64_t>(size_ - 1) * in.nbytes());
  return traced(do_all_gather(in, out, "all_gather " + tstr(in) + " -> " + tstr(out) + " on " + where()));
}

WorkPtr Communicator::all_to_all(const Tensor& in, Tensor& out) {
  check_tensor("all_to_all", "in", in);
  check_tensor("all_to_all", "out", out);
  check_disjoint("all_to_all", in, out);
  MF_CHECK(in.dtype() == out.dtype() && in.shape() == out.shape(), "all_to_all: in ", tstr(in), " and out ",
           tstr(out), " must have the same shape and dtype (", where(), ")");
  MF_CHECK(in.ndim() >= 1 && in.shape(0) % size_ == 0, "all_to_all: axis 0 of ", tstr(in),
           " must split into size (", size_, ") equal chunks (", where(), ")");
  count(OpKind::kAllToAll, static_cast<uint64_t>(size_ - 1) * (in.nbytes() / size_));
  return traced(do_all_to_all(in, out, "all_to_all " + tstr(in) + " on " + where()));
}

WorkPtr Communicator::broadcast(Tensor& t, int root) {
  check_tensor("broadcast", "tensor", t);
  check_peer("broadcast", "root", root);
  count(OpKind::kBroadcast, rank_ == root ? t.nbytes() : 0);
  return traced(do_broadcast(t, root, "broadcast " + tstr(t) + " from root " + std::to_string(root) + " on " + where()));
}

namespace {
constexpr int kMaxTag = 32767;  // the least MPI_TAG_UB the MPI standard allows
}

WorkPtr Communicator::send(const Tensor& t, int peer, int tag) {
  check_tensor("send", "tensor", t);
  check_peer("send", "peer", peer);
  MF_CHECK(tag >= 0 && tag <= kMaxTag, "send: tag ", tag, " outside [0, ", kMaxTag, "] (", where(), ")");
  count(OpKind::kSend, t.nbytes());
  return traced(do_send(t, peer, tag,
                 "send " + tstr(t) + " to " + std::to_string(peer) + " tag " + std::to_string(tag) + " on " + where()));
}

WorkPtr Communicator::recv(Tensor& t, int peer, int tag) {
  check_tensor("recv", "tensor", t);
  check_peer("recv", "peer", peer);
  MF_CHECK(tag >= 0 && tag <= kMaxTag, "recv: tag ", tag, " outside [0, ", kMaxTag, "] (", where(), ")");
  count(OpKind::kRecv, 0);
  return traced(do_recv(t, peer, tag,
                 "recv " + tstr(t) + " from " + std::to_string(peer) + " tag " + std::to_string(tag) + " on " +
                     where()));
}

WorkPtr Communicator::barrier() {
  count(OpKind::kBarrier, 0);
  return traced(do_barrier("barrier on " + where()));
}

std::shared_ptr<Communicator> Communicator::sub_group(const std::vector<int>& ranks) {
  MF_CHECK(!ranks.empty(), "sub_group: empty rank list (", where(), ")");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    check_peer("sub_group", "rank", sorted[i]);
    MF_CHECK(i == 0 || sorted[i] != sorted[i - 1], "sub_group: rank ", sorted[i], " listed twice (", where(), ")");
  }
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  int key = static_cast<int>(it - ranks.begin());
  return split(it == ranks.end() ? -1 : 0, key);
}

}  // namespace mf::comm
