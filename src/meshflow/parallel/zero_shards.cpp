#include "meshflow/parallel/zero_shards.h"

#include <algorithm>
#include <chrono>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/autograd/node.h"
#include "meshflow/core/error.h"
#include "meshflow/global/sbp.h"
#include "meshflow/ops/ops.h"
#include "meshflow/tensor/storage.h"

namespace mf::parallel {

struct ZeroShards::State {
  struct Group {
    std::vector<size_t> params;               // parameter indices: tp-split ones first, then replicated
    std::vector<std::vector<int64_t>> off;    // [rank q][i]: offset of parameter i's slice q in segment q
    int64_t seg = 0;                          // S: segment length (elements), the same on every dp rank
    int64_t rep_begin = 0, rep_end = 0;       // this rank's replicated slices in its segment
    Tensor param_seg;                         // stage 3: (S,) this rank's parameter slices
    Tensor grad_seg;                          // (S,) this rank's reduced gradient slices
    bool resident = true;                     // stage 3: the parameters hold their whole values
    Tensor gather_buf;                        // (N * S,) an all-gather in flight
    comm::WorkPtr gather_work;
    Tensor pack_buf;                          // (N * S,) gradients being reduce-scattered
    comm::WorkPtr reduce_work;
    int64_t pending = 0;                      // armed step: gradients not final yet
    int64_t ready_in_pass = 0;                // stage 3: gradients accumulated in this backward pass
  };
  Options opts;
  int n = 1, r = 0;
  std::vector<Tensor> params;
  std::vector<int> group_of, index_of;
  std::vector<bool> filled;
  std::vector<int> firings, fired;  // grad-ready firings per backward (nn::hook_firings), and so far
  std::vector<Group> groups;
  std::vector<nn::ParamUnit> units;
  std::vector<std::vector<int>> unit_groups;  // per unit (position in `units`): the groups it uses
  bool armed = false;
  bool launched = false;  // the last gradient made a group's reduce-scatter start
  int64_t buffer_bytes = 0, buffer_peak = 0;  // pack and gather buffers alive now / at most
  double exposed_s = 0;                       // the last finish(): packing what was left and waiting

  void hold(Tensor& slot, Tensor t) {
    drop(slot);
    slot = std::move(t);
    buffer_bytes += static_cast<int64_t>(slot.nbytes());
    buffer_peak = std::max(buffer_peak, buffer_bytes);
  }
  void drop(Tensor& slot) {
    if (slot.defined()) buffer_bytes -= static_cast<int64_t>(slot.nbytes());
    slot = Tensor();
  }

  int64_t numel(size_t k) const { return params[k].numel(); }
  int64_t slice_start(size_t k, int q) const { return global::split_start(numel(k), n, q); }
  int64_t slice_size(size_t k, int q) const { return global::split_size(numel(k), n, q); }
  Tensor flat(const Tensor& t) const { return reshape(t, {t.numel()}); }

  int unit_pos(int64_t id) const {
    for (size_t u = 0; u < units.size(); ++u)
      if (units[u].id == id) return static_cast<int>(u);
    MF_THROW("ZeRO-3: the model ran unit ", id, ", which this stage's parameter units do not list");
  }

  // ---- parameters (stage 3)
  void prefetch(int g) {
    Group& G = groups[static_cast<size_t>(g)];
    if (G.resident || G.gather_work) return;
    hold(G.gather_buf, empty({static_cast<int64_t>(n) * G.seg}, G.param_seg.dtype(), G.param_seg.device()));
    G.gather_work = opts.dp->all_gather(G.param_seg, G.gather_buf);
  }

  void gather(int g) {
    Group& G = groups[static_cast<size_t>(g)];
    if (G.resident) return;
    prefetch(g);
    G.gather_work->wait();
    NoGradGuard ng;
    for (size_t i = 0; i < G.params.size(); ++i) {
      const size_t k = G.params[i];
      params[k].impl()->storage->materialize();
      Tensor whole = flat(params[k]);
      for (int q = 0; q < n; ++q) {
        Tensor dst = narrow(whole, 0, slice_start(k, q), slice_size(k, q));
        copy_(dst, narrow(G.gather_buf, 0, q * G.seg + G.off[static_cast<size_t>(q)][i], slice_size(k, q)));
      }
    }
    drop(G.gather_buf);
    G.gather_work.reset();
    G.resident = true;
  }

  void release(int g) {
    Group& G = groups[static_cast<size_t>(g)];
    if (G.gather_work) {  // a prefetch nobody used
      G.gather_work->wait();
      G.gather_work.reset();
      drop(G.gather_buf);
    }
    if (!G.resident) return;
    for (size_t k : G.params) params[k].impl()->storage->release();
    G.resident = false;
  }

  // Gathers unit u's groups and prefetches the next unit of the same chunk (step +1 forward,
  // -1 backward).
  void use_unit(int u, int step) {
    for (int g : unit_groups[static_cast<size_t>(u)]) gather(g);
    const int next = u + step;
    if (next >= 0 && next < static_cast<int>(units.size()) &&
        units[static_cast<size_t>(next)].chunk == units[static_cast<size_t>(u)].chunk)
      for (int g : unit_groups[static_cast<size_t>(next)]) prefetch(g);
  }

  // ---- gradients
  void poll() {
    for (Group& G : groups)
      if (G.reduce_work && G.pack_buf.defined() && G.reduce_work->is_completed()) drop(G.pack_buf);
  }

  void fill(size_t k) {
    NoGradGuard ng;
    Group& G = groups[static_cast<size_t>(group_of[k])];
    const size_t i = static_cast<size_t>(index_of[k]);
    if (!G.pack_buf.defined()) hold(G.pack_buf, zeros({static_cast<int64_t>(n) * G.seg}, G.grad_seg.dtype(), G.grad_seg.device()));
    Tensor g = params[k].grad();
    if (g.defined()) {
      Tensor whole = flat(contiguous(g));
      for (int q = 0; q < n; ++q) {
        Tensor dst = narrow(G.pack_buf, 0, q * G.seg + G.off[static_cast<size_t>(q)][i], slice_size(k, q));
        copy_(dst, narrow(whole, 0, slice_start(k, q), slice_size(k, q)));
      }
      params[k].set_grad(Tensor());  // the whole gradient is not needed any more
    }
    filled[k] = true;
    if (--G.pending == 0) {
      if (opts.grad_scale != 1.0) scale_(G.pack_buf, opts.grad_scale);
      G.reduce_work = opts.dp->reduce_scatter(G.pack_buf, G.grad_seg);
      launched = true;
    }
  }

  void on_grad_ready(size_t k) {
    if (++fired[k] < firings[k]) return;  // more of its gradient is to come in this backward
    fired[k] = 0;
    launched = false;
    if (armed && !filled[k]) fill(k);
    if (opts.stage == 3) {
      Group& G = groups[static_cast<size_t>(group_of[k])];
      if (++G.ready_in_pass == static_cast<int64_t>(G.params.size())) {
        G.ready_in_pass = 0;
        release(group_of[k]);
      }
    }
    // Earlier reductions are polled (their packs freed) when a group's starts, not at every
    // gradient: a test that finds nothing to do yields the core under MPI when the ranks
    // oversubscribe it, a scheduler time slice each.
    if (launched) poll();
  }
  // Groups: each parameter belongs to the first unit that uses it, tp-replicated ones last.
  void build_groups(const std::vector<bool>& tp_replicated);
  // Every rank's slice offsets in each group's segments; the gradient (and at stage 3 the
  // parameter) segments, this rank's slices copied in.
  void lay_out_segments(const std::vector<bool>& tp_replicated);
};

void ZeroShards::State::build_groups(const std::vector<bool>& tp_replicated) {
  State& s = *this;
  const size_t np = s.params.size();
  s.unit_groups.resize(s.units.size());
  for (size_t u = 0; u < s.units.size(); ++u) {
    std::vector<size_t> mine;
    for (size_t k : s.units[u].params) {
      MF_CHECK(k < np, "ZeRO: unit ", s.units[u].id, " names parameter ", k, " of ", np);
      if (s.group_of[k] < 0) mine.push_back(k);
    }
    if (!mine.empty()) {
      std::stable_partition(mine.begin(), mine.end(), [&](size_t k) { return !tp_replicated[k]; });
      State::Group G;
      G.params = mine;
      const int g = static_cast<int>(s.groups.size());
      for (size_t i = 0; i < mine.size(); ++i) {
        s.group_of[mine[i]] = g;
        s.index_of[mine[i]] = static_cast<int>(i);
      }
      s.groups.push_back(std::move(G));
    }
    for (size_t k : s.units[u].params) {
      const int g = s.group_of[k];
      auto& ug = s.unit_groups[u];
      if (std::find(ug.begin(), ug.end(), g) == ug.end()) ug.push_back(g);
    }
  }
  for (size_t k = 0; k < np; ++k)
    MF_CHECK(s.group_of[k] >= 0, "ZeRO: parameter ", k, " ", s.params[k].str(), " is used by no unit of the model");
}

void ZeroShards::State::lay_out_segments(const std::vector<bool>& tp_replicated) {
  State& s = *this;
  const DType dt = s.params[0].dtype();
  const Device dev = s.params[0].device();  // the segments live with the parameters (a GPU run's on the GPU)
  for (State::Group& G : s.groups) {
    G.off.assign(static_cast<size_t>(s.n), {});
    for (int q = 0; q < s.n; ++q) {
      int64_t at = 0;
      for (size_t k : G.params) {
        MF_CHECK(s.numel(k) >= s.n, "ZeRO: parameter ", k, " ", s.params[k].str(), " has fewer elements than the ", s.n,
                 " data-parallel ranks it is sharded over");
        if (q == s.r && tp_replicated[k] && G.rep_end == 0) G.rep_begin = G.rep_end = at;
        G.off[static_cast<size_t>(q)].push_back(at);
        at += s.slice_size(k, q);
        if (q == s.r && tp_replicated[k]) G.rep_end = at;
      }
      G.seg = std::max(G.seg, at);
    }
    G.grad_seg = zeros({G.seg}, dt, dev);
    if (s.opts.stage == 3) {
      NoGradGuard ng;
      G.param_seg = zeros({G.seg}, dt, dev);
      for (size_t i = 0; i < G.params.size(); ++i) {
        const size_t k = G.params[i];
        Tensor dst = narrow(G.param_seg, 0, G.off[static_cast<size_t>(s.r)][i], s.slice_size(k, s.r));
        copy_(dst, narrow(s.flat(s.params[k]), 0, s.slice_start(k, s.r), s.slice_size(k, s.r)));
      }
    }
  }
}

ZeroShards::ZeroShards(std::vector<Tensor> params, std::vector<bool> tp_replicated, std::vector<nn::ParamUnit> units,
                       Options opts)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  MF_CHECK(opts.stage == 2 || opts.stage == 3, "ZeRO: ZeroShards serves stages 2 and 3, got ", opts.stage);
  MF_CHECK(opts.dp != nullptr, "ZeRO: no data-parallel group");
  MF_CHECK(tp_replicated.size() == params.size(), "ZeRO: ", tp_replicated.size(), " replication flags for ",
           params.size(), " parameters");
  s.opts = std::move(opts);
  s.n = s.opts.dp->size();
  s.r = s.opts.dp->rank();
  s.params = std::move(params);
  s.units = std::move(units);
  const size_t np = s.params.size();
  s.firings = nn::hook_firings(s.units, np);
  s.fired.assign(np, 0);
  s.group_of.assign(np, -1);
  s.index_of.assign(np, -1);
  s.filled.assign(np, false);
  for (size_t k = 0; k < np; ++k) {
    const Tensor& p = s.params[k];
    MF_CHECK(p.requires_grad() && p.is_leaf() && p.is_contiguous() && p.offset() == 0 &&
                 p.impl()->storage->nbytes() == p.nbytes(),
             "ZeRO: parameter ", k, " ", p.str(), " must be a contiguous leaf owning its whole storage");
    MF_CHECK(p.dtype() == s.params[0].dtype(), "ZeRO: parameters of mixed dtypes (", dtype_name(p.dtype()), ", ",
             dtype_name(s.params[0].dtype()), ")");
  }
  s.build_groups(tp_replicated);
  s.lay_out_segments(tp_replicated);
  if (s.opts.stage == 3)
    for (int g = 0; g < static_cast<int>(s.groups.size()); ++g) s.release(g);
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < np; ++k)
    s.params[k].register_grad_ready_hook([weak, k](const Tensor&) {
      if (auto st = weak.lock()) st->on_grad_ready(k);
    });
}

ZeroShards::~ZeroShards() {
  for (auto& G : state_->groups)
    for (comm::WorkPtr* w : {&G.gather_work, &G.reduce_work})
      if (*w) comm::finish_for_teardown(**w);
}

Tensor ZeroShards::shard(size_t k) const {
  const State& s = *state_;
  const auto& G = s.groups.at(static_cast<size_t>(s.group_of.at(k)));
  if (s.opts.stage == 3)
    return narrow(G.param_seg, 0, G.off[static_cast<size_t>(s.r)][static_cast<size_t>(s.index_of[k])],
                  s.slice_size(k, s.r));
  return narrow(s.flat(s.params[k]), 0, s.slice_start(k, s.r), s.slice_size(k, s.r));
}

Tensor ZeroShards::shard_grad(size_t k) const {
  const State& s = *state_;
  const auto& G = s.groups.at(static_cast<size_t>(s.group_of.at(k)));
  return narrow(G.grad_seg, 0, G.off[static_cast<size_t>(s.r)][static_cast<size_t>(s.index_of[k])],
                s.slice_size(k, s.r));
}

int64_t ZeroShards::shard_start(size_t k) const { return state_->slice_start(k, state_->r); }

void ZeroShards::prepare() {
  State& s = *state_;
  MF_CHECK(!s.armed, "ZeroShards::prepare: the previous step was not finished");
  s.armed = true;
  std::fill(s.filled.begin(), s.filled.end(), false);
  for (auto& G : s.groups) {
    G.pending = static_cast<int64_t>(G.params.size());
    G.reduce_work.reset();
    s.drop(G.pack_buf);
  }
}

void ZeroShards::finish() {
  State& s = *state_;
  MF_CHECK(s.armed, "ZeroShards::finish without prepare()");
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < s.params.size(); ++k)  // parameters without a gradient count as zeros
    if (!s.filled[k]) s.fill(k);
  for (auto& G : s.groups) {
    G.reduce_work->wait();
    G.reduce_work.reset();
    s.drop(G.pack_buf);
    if (s.opts.cp && s.opts.cp->size() > 1 && G.grad_seg.numel() > 0) s.opts.cp->all_reduce(G.grad_seg)->wait();
    if (s.opts.tp && s.opts.tp->size() > 1 && G.rep_end > G.rep_begin) {
      Tensor tail = narrow(G.grad_seg, 0, G.rep_begin, G.rep_end - G.rep_begin);
      s.opts.tp->all_reduce(tail)->wait();
    }
  }
  s.exposed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s.opts.stage == 3) release_all();
  s.armed = false;
}

void ZeroShards::enter(int64_t unit) {
  State& s = *state_;
  if (s.opts.stage == 3) s.use_unit(s.unit_pos(unit), +1);
}

Tensor ZeroShards::leave(int64_t unit, const Tensor& out) {
  State& s = *state_;
  if (s.opts.stage != 3) return out;
  const int u = s.unit_pos(unit);
  for (int g : s.unit_groups[static_cast<size_t>(u)]) s.release(g);
  if (!out.requires_grad() || !grad_enabled()) return out;
  // Backward reaches this alias before the unit's own backward: gather its parameters again.
  Tensor alias = out.detach();
  std::weak_ptr<State> weak = state_;
  record("zero3_gather", {out}, {alias}, [weak, u](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    if (auto st = weak.lock()) st->use_unit(u, -1);
    return {g[0]};
  });
  return alias;
}

void ZeroShards::release_all() {
  if (state_->opts.stage != 3) return;
  for (int g = 0; g < num_groups(); ++g) state_->release(g);
}

double ZeroShards::last_exposed_s() const { return state_->exposed_s; }

int ZeroShards::num_groups() const { return static_cast<int>(state_->groups.size()); }

int64_t ZeroShards::buffer_peak_bytes() const { return state_->buffer_peak; }
void ZeroShards::reset_buffer_peak() { state_->buffer_peak = state_->buffer_bytes; }

int64_t ZeroShards::grad_segment_bytes() const {
  int64_t b = 0;
  for (const auto& G : state_->groups) b += static_cast<int64_t>(G.grad_seg.nbytes());
  return b;
}

}  // namespace mf::parallel
