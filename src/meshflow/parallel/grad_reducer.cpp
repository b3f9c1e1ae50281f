#include "meshflow/parallel/grad_reducer.h"

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/error.h"
#include "meshflow/ops/ops.h"

namespace mf::parallel {

using Clock = std::chrono::steady_clock;

namespace {
// Reductions running at once on the host. MPI progresses concurrent non-blocking all-reduces of
// large buckets much more slowly than the same reductions one after another (measured with
// OpenMPI over shared memory: 13 buckets of 28-157 MB take 4.1 s at once, 1.5 s one at a time).
// GPU buckets (NCCL) are queued on the communicator's stream, which runs them one after another
// anyway: launching each as soon as it is full keeps the host out of the loop.
constexpr int kMaxInFlightHost = 1;
constexpr int kMaxInFlightDevice = 1 << 30;
}  // namespace

struct GradReducer::State {
  struct Bucket {
    std::vector<size_t> params;   // indices into State::params, in slot order
    std::vector<int64_t> offset;  // element offset of each slot in `flat`
    Tensor flat;                  // (numel,) the bucket's gradients, reduced in place
    int64_t pending = 0;          // slots not yet filled this step
    comm::WorkPtr work;
    bool done = false;
  };
  std::vector<Tensor> params;
  std::vector<int> bucket_of;     // parameter index -> bucket
  std::vector<int> slot_of;       // parameter index -> slot in its bucket
  std::vector<bool> filled;       // parameter index -> slot filled this step
  std::vector<int> firings, fired;  // grad-ready firings per backward, and so far in this one
  std::vector<Bucket> buckets;
  std::shared_ptr<comm::Communicator> comm;
  double grad_scale = 1.0;
  int max_in_flight = kMaxInFlightHost;
  bool armed = false;
  int next_launch = 0;            // buckets launch strictly in index order
  Clock::time_point t0;
  ReduceTimeline timeline;

  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  Tensor slot(size_t p) {
    Bucket& b = buckets[static_cast<size_t>(bucket_of[p])];
    const Tensor& t = params[p];
    return view(narrow(b.flat, 0, b.offset[static_cast<size_t>(slot_of[p])], t.numel()), t.shape());
  }

  void fill(size_t p) {
    NoGradGuard ng;
    Tensor dst = slot(p);
    Tensor g = params[p].grad();
    if (g.defined())
      copy_(dst, g);
    else
      fill_(dst, 0.0);
    // The gradient lives on in its slot (finish() points .grad there): free the parameter's own
    // now, so the step holds the gradients once, not the buckets beside every .grad.
    params[p].set_grad(Tensor());
    filled[p] = true;
    --buckets[static_cast<size_t>(bucket_of[p])].pending;
  }

  int in_flight() const {
    int n = 0;
    for (int i = 0; i < next_launch; ++i) n += buckets[static_cast<size_t>(i)].done ? 0 : 1;
    return n;
  }

  void launch_ready() {
    while (next_launch < static_cast<int>(buckets.size()) && buckets[static_cast<size_t>(next_launch)].pending == 0 &&
           in_flight() < max_in_flight) {
      Bucket& b = buckets[static_cast<size_t>(next_launch)];
      NoGradGuard ng;
      if (grad_scale != 1.0) scale_(b.flat, grad_scale);
      timeline.buckets[static_cast<size_t>(next_launch)].launch_s = now_s();
      b.work = comm->all_reduce(b.flat);
      ++next_launch;
    }
  }

  void poll() {
    for (int i = 0; i < next_launch; ++i) {
      Bucket& b = buckets[static_cast<size_t>(i)];
      if (!b.done && b.work->is_completed()) {
        b.done = true;
        timeline.buckets[static_cast<size_t>(i)].done_s = now_s();
      }
    }
    launch_ready();  // a finished reduction makes room for the next bucket
  }

  void on_grad_ready(size_t p) {
    if (++fired[p] < firings[p]) return;  // more of its gradient is to come in this backward
    fired[p] = 0;
    if (!armed || filled[p]) return;
    fill(p);
    launch_ready();
    poll();
  }
};

GradReducer::GradReducer(std::vector<Tensor> params, std::shared_ptr<comm::Communicator> comm, int64_t bucket_bytes,
                         double grad_scale, std::vector<int> firings)
    : state_(std::make_shared<State>()) {
  MF_CHECK(comm != nullptr, "GradReducer: no communicator");
  MF_CHECK(bucket_bytes >= 1, "GradReducer: bucket size must be >= 1 byte, got ", bucket_bytes);
  State& s = *state_;
  s.params = std::move(params);
  s.comm = std::move(comm);
  s.grad_scale = grad_scale == 0.0 ? 1.0 / static_cast<double>(s.comm->size()) : grad_scale;
  const size_t n = s.params.size();
  s.bucket_of.assign(n, -1);
  s.slot_of.assign(n, -1);
  s.filled.assign(n, false);
  s.firings = firings.empty() ? std::vector<int>(n, 1) : std::move(firings);
  MF_CHECK(s.firings.size() == n, "GradReducer: ", s.firings.size(), " hook firings for ", n, " parameters");
  s.fired.assign(n, 0);
  int64_t open_bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const Tensor& p = s.params[k];
    MF_CHECK(p.requires_grad() && p.is_leaf() && p.is_contiguous(), "GradReducer: parameter ", k, " ", p.str(),
             " must be a contiguous leaf that requires grad");
    const bool new_bucket = s.buckets.empty() || open_bytes >= bucket_bytes ||
                            s.params[s.buckets.back().params.front()].dtype() != p.dtype();
    if (new_bucket) {
      s.buckets.emplace_back();
      open_bytes = 0;
    }
    State::Bucket& b = s.buckets.back();
    s.bucket_of[k] = static_cast<int>(s.buckets.size() - 1);
    s.slot_of[k] = static_cast<int>(b.params.size());
    b.offset.push_back(b.params.empty() ? 0 : b.offset.back() + s.params[b.params.back()].numel());
    b.params.push_back(k);
    open_bytes += static_cast<int64_t>(p.nbytes());
    total_bytes_ += static_cast<int64_t>(p.nbytes());
  }
  for (State::Bucket& b : s.buckets) {
    const Tensor& last = s.params[b.params.back()];
    b.flat = zeros({b.offset.back() + last.numel()}, last.dtype(), last.device());
  }
  if (n > 0 && s.params[0].device().type != DeviceType::kCPU) s.max_in_flight = kMaxInFlightDevice;
  s.timeline.buckets.resize(s.buckets.size());
  for (size_t k = 0; k < n; ++k) s.timeline.buckets[static_cast<size_t>(s.bucket_of[k])].nbytes += s.params[k].nbytes();
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < n; ++k)
    s.params[k].register_grad_ready_hook([weak, k](const Tensor&) {
      if (auto st = weak.lock()) st->on_grad_ready(k);
    });
}

GradReducer::~GradReducer() {
  // Launched reductions still write the buckets: let them finish (their Work keeps the buffers).
  for (auto& b : state_->buckets)
    if (b.work && !b.done) comm::finish_for_teardown(*b.work);
}

void GradReducer::prepare() {
  State& s = *state_;
  MF_CHECK(!s.armed, "GradReducer::prepare: the previous step was not finished");
  s.armed = true;
  s.next_launch = 0;
  s.t0 = Clock::now();
  std::fill(s.filled.begin(), s.filled.end(), false);
  for (auto& b : s.buckets) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.work.reset();
    b.done = false;
  }
  for (auto& t : s.timeline.buckets) t.launch_s = t.done_s = 0;
}

void GradReducer::finish() {
  State& s = *state_;
  MF_CHECK(s.armed, "GradReducer::finish without prepare()");
  s.timeline.backward_s = s.now_s();
  for (size_t k = 0; k < s.params.size(); ++k)
    if (!s.filled[k]) s.fill(k);
  s.launch_ready();
  for (size_t i = 0; i < s.buckets.size(); ++i) {
    State::Bucket& b = s.buckets[i];
    if (!b.done) {
      b.work->wait();
      b.done = true;
      s.timeline.buckets[i].done_s = s.now_s();
    }
    s.launch_ready();
  }
  for (size_t k = 0; k < s.params.size(); ++k) s.params[k].set_grad(s.slot(k));
  s.timeline.finish_s = s.now_s();
  s.armed = false;
}

int GradReducer::num_buckets() const { return static_cast<int>(state_->buckets.size()); }
const std::vector<size_t>& GradReducer::bucket_params(int b) const {
  return state_->buckets.at(static_cast<size_t>(b)).params;
}
const ReduceTimeline& GradReducer::last_timeline() const { return state_->timeline; }

}  // namespace mf::parallel
