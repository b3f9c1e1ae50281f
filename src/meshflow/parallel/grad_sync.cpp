#include "meshflow/parallel/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/global/boxing.h"
#include "meshflow/parallel/grad_reducer.h"
#include "meshflow/global/sbp.h"
#include "meshflow/parallel/zero_shards.h"
#include "meshflow/ops/ops.h"

namespace mf::parallel {

namespace {
// The sum of the gradients' squares, as a double, on a GPU: each gradient's sum widened to f64 and
// added there in order (as the host path adds their item()s), then read once — one
// synchronisation instead of one per parameter.
double sum_of_squares_on_device(const std::vector<Tensor>& grads) {
  Tensor acc;
  for (const Tensor& g : grads) {
    Tensor s = cast(sum_squares(g), DType::kF64);
    acc = acc.defined() ? add(acc, s) : s;
  }
  return acc.defined() ? acc.item() : 0.0;
}
}  // namespace

GradSync::GradSync(nn::NamedTensors named, std::vector<bool> split, std::vector<nn::ParamUnit> units,
                   std::vector<std::string> tied, NamedGroups groups, GradSyncOptions opts)
    : named_(std::move(named)), split_(std::move(split)), units_(std::move(units)), g_(std::move(groups)), opts_(opts) {
  MF_CHECK(split_.size() == named_.size(), "GradSync: ", split_.size(), " split flags for ", named_.size(), " parameters");
  optim::check_clip_norm_type(opts_.norm_type, "optim.clip_grad_norm_type");
  tied_copy_.assign(named_.size(), false);
  set_tied(std::move(tied));
  const global::ParallelDims dims = g_.dims();
  const int64_t stage_ranks = dims.product() / dims.size("pp");
  MF_CHECK(!g_.get("tp") || g_.size("stage") == stage_ranks, "GradSync: the stage group's ", g_.size("stage"),
           " ranks must be every dimension's but pp (", dims.str(), ": ", stage_ranks, ")");
  const std::vector<Tensor> ps = params();
  const std::vector<int> firings = nn::hook_firings(units_, ps.size());
  if (opts_.zero_stage >= 2 && g_.ptr("dp")) {
    parallel::ZeroShards::Options o;
    o.stage = opts_.zero_stage;
    o.dp = g_.ptr("dp");
    o.tp = g_.ptr("tp");
    o.cp = g_.ptr("cp");
    o.grad_scale = 1.0 / static_cast<double>(g_.size("dp"));  // the mean over dp (replicated ones: then summed over tp)
    std::vector<bool> replicated(ps.size());
    for (size_t k = 0; k < ps.size(); ++k) replicated[k] = g_.ptr("tp") && !split_[k];
    zero_shards_ = std::make_unique<parallel::ZeroShards>(ps, replicated, units_, o);
    return;  // ZeRO 2 and 3 reduce the gradients themselves
  }
  // The mean over dp; with cp, the sum over dp x cp of the cp ranks' partial sums divided by dp.
  const double mean = 1.0 / static_cast<double>(g_.size("dp"));
  if (!g_.ptr("tp")) {
    if (g_.ptr("dp_cp"))
      reducer_ = std::make_unique<parallel::GradReducer>(ps, g_.ptr("dp_cp"), opts_.bucket_bytes, mean, firings);
    return;
  }
  // Split parameters: exact local gradients (partial sums over cp), summed over dp x cp and divided
  // by dp. Replicated ones: partial sums over tp and cp (each rank of the layers seeds 1/(tp cp) of
  // the loss's gradient: Model::head_loss), so summed over the stage (dp x cp x tp), divided by dp.
  std::vector<Tensor> s, r;
  std::vector<int> s_firings, r_firings;
  for (size_t k = 0; k < ps.size(); ++k) {
    (split_[k] ? s : r).push_back(ps[k]);
    (split_[k] ? s_firings : r_firings).push_back(firings[k]);
  }
  if (g_.ptr("dp_cp") && !s.empty())
    reducer_ = std::make_unique<parallel::GradReducer>(s, g_.ptr("dp_cp"), opts_.bucket_bytes, mean, s_firings);
  if (!r.empty())
    replicated_reducer_ = std::make_unique<parallel::GradReducer>(r, g_.ptr("stage"), opts_.bucket_bytes, mean, r_firings);
}

GradSync::~GradSync() = default;

std::vector<Tensor> GradSync::params() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named_) out.push_back(t);
  return out;
}

nn::ParamUseHooks* GradSync::param_use_hooks() const { return params_sliced() ? zero_shards_.get() : nullptr; }

std::vector<optim::ParamGroup> GradSync::optimizer_groups(std::vector<optim::ParamGroup> groups) {
  if (opts_.zero_stage < 1 || !g_.ptr("dp")) return groups;
  MF_CHECK(zero_.empty(), "GradSync: optimizer_groups() is called once");
  // The optimizer sees this rank's flat slice of every parameter, under the parameter's name.
  NoGradGuard ng;
  const int n = g_.size("dp"), r = g_.rank("dp");
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t k = 0; k < named_.size(); ++k) index[named_[k].second.impl()] = k;
  for (auto& group : groups)
    for (auto& [name, p] : group.params) {
      const int64_t numel = p.numel();
      MF_CHECK(numel >= n, "ZeRO: parameter '", name, "' has ", numel, " elements, fewer than the ", n,
               " data-parallel ranks it is sharded over");
      const size_t k = index.at(p.impl());
      ParamShard z{p, Tensor(), global::split_start(numel, n, r), global::split_size(numel, n, r), k};
      z.shard = zero_shards_ ? zero_shards_->shard(k) : narrow(reshape(p, {numel}), 0, z.start, z.numel);
      zero_.push_back(z);
      p = z.shard;
    }
  return groups;
}

void GradSync::prepare() {
  for (auto* r : {reducer_.get(), replicated_reducer_.get()})
    if (r) r->prepare();
  if (zero_shards_) zero_shards_->prepare();
}

double GradSync::finish() {
  double exposed = 0;
  for (auto* r : {reducer_.get(), replicated_reducer_.get()})
    if (r) {
      r->finish();
      exposed += r->last_timeline().exposed_s();
    }
  if (zero_shards_) {
    zero_shards_->finish();
    exposed += zero_shards_->last_exposed_s();
    for (ParamShard& z : zero_) z.shard.set_grad(zero_shards_->shard_grad(z.index));
  }
  if (!tied_sums_.empty()) {  // the tied parameters' sums over their stages: after backward, all exposed
    const auto t0 = std::chrono::steady_clock::now();
    sum_tied_gradients();
    exposed += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return exposed;
}

void GradSync::set_tied(std::vector<std::string> tied) {
  if (!g_.ptr("pp") || tied.empty()) return;
  std::sort(tied.begin(), tied.end());
  tied.erase(std::unique(tied.begin(), tied.end()), tied.end());
  // Which stages hold each tied parameter: one all-gather of this stage's flags over the stages.
  const int64_t n = static_cast<int64_t>(tied.size()), stages = g_.size("pp");
  std::vector<int64_t> index(tied.size(), -1);
  Tensor holds = zeros({n}, DType::kI64);
  for (size_t j = 0; j < tied.size(); ++j)
    for (size_t k = 0; k < named_.size(); ++k)
      if (named_[k].first == tied[j]) {
        index[j] = static_cast<int64_t>(k);
        holds.data<int64_t>()[j] = 1;
      }
  Tensor all = zeros({stages * n}, DType::kI64);
  g_.get("pp")->all_gather(holds, all)->wait();
  std::vector<std::pair<std::vector<int>, comm::CommPtr>> made;  // one group per set of stages
  for (size_t j = 0; j < tied.size(); ++j) {
    std::vector<int> holders;
    for (int s = 0; s < stages; ++s)
      if (all.data<int64_t>()[s * n + static_cast<int64_t>(j)]) holders.push_back(s);
    if (holders.size() < 2) continue;
    auto found = std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first == holders; });
    if (found == made.end()) {  // every stage makes it, in the same order (sub_group is collective over pp)
      const bool ends = holders == std::vector<int>{0, static_cast<int>(stages - 1)};
      made.emplace_back(holders, ends ? g_.ptr("tied") : g_.get("pp")->sub_group(holders));
      found = made.end() - 1;
    }
    const comm::CommPtr group = found->second;
    if (index[j] < 0) continue;
    const size_t k = static_cast<size_t>(index[j]);
    tied_copy_[k] = g_.rank("pp") != holders.front();
    tied_sums_.emplace_back(k, group);
  }
}

void GradSync::sum_tied_gradients() {
  // A tied parameter's copies: the sum of their gradients (of their ZeRO slices) on every stage
  // holding one, parameter by parameter in the order every stage follows.
  NoGradGuard ng;
  for (auto& [k, group] : tied_sums_) {
    Tensor w = named_[k].second;
    if (zero_shards_) {
      for (ParamShard& z : zero_)
        if (z.index == k) {
          Tensor g = z.shard.grad();
          group->all_reduce(g)->wait();
        }
      continue;
    }
    Tensor g = w.grad();
    if (!g.defined()) g = zeros(w.shape(), w.dtype(), w.device());
    g = contiguous(g);
    group->all_reduce(g)->wait();
    w.set_grad(g);
  }
}

GradSync::Clipping GradSync::clip(double max_norm, double grad_scale) const {
  const double norm_type = opts_.norm_type;
  const bool cpu = opts_.device.type == DeviceType::kCPU;
  if (!zero_shards_ && !g_.ptr("tp") && !g_.ptr("pp") && cpu) {
    const double norm = optim::grad_norm(params(), grad_scale, norm_type);
    return {norm, optim::clip_factor(norm, max_norm)};
  }
  const bool inf_norm = norm_type != 2.0;
  // The logical norm. L2: split pieces' squares summed over tp, replicated ones counted once, the
  // stages' sums added (the last stage's copies of tied parameters left out). Under ZeRO 2/3 each
  // rank holds its dp slice of every gradient: both sums are then also summed over dp. Infinity:
  // the largest |element| of the same gradients, the max over tp, pp and dp instead.
  NoGradGuard ng;
  std::vector<Tensor> counted;  // infinity norm: what the max runs over
  Tensor ss = zeros({2}, DType::kF64);  // split, replicated (host)
  std::vector<Tensor> on_device[2];     // a GPU run's gradients of each kind, summed there
  auto add_grad = [&](const Tensor& g, size_t index) {
    if (!g.defined()) return;
    if (tied_copy_[index]) return;
    if (inf_norm) {
      counted.push_back(g);
      return;
    }
    const int kind = g_.ptr("tp") && split_[index] ? 0 : 1;  // without tp every parameter counts as replicated
    if (cpu)
      ss.data<double>()[kind] += sum_squares(g).item();
    else
      on_device[kind].push_back(g);
  };
  if (zero_shards_) {
    for (const ParamShard& z : zero_) add_grad(z.shard.grad(), z.index);
  } else {
    for (size_t k = 0; k < named_.size(); ++k) add_grad(named_[k].second.grad(), k);
  }
  double norm = 0;
  if (inf_norm) {
    // Copies held alike (over dp, tp-replicated, the tied parameters' stages) are equal, so one
    // max over every rank of the run is the logical one. NaN goes as a flag: MPI's max may drop it.
    const double local = optim::max_abs(counted);
    Tensor m = zeros({2}, DType::kF64);
    m.data<double>()[0] = std::isnan(local) ? 0.0 : local;
    m.data<double>()[1] = std::isnan(local) ? 1.0 : 0.0;
    if (comm::Communicator* c = g_.everyone()) c->all_reduce(m, comm::ReduceOp::kMax)->wait();
    norm = m.data<double>()[1] > 0 ? std::nan("") : m.data<double>()[0] / grad_scale;
  } else {
    if (!cpu)
      for (int kind = 0; kind < 2; ++kind) ss.data<double>()[kind] = sum_of_squares_on_device(on_device[kind]);
    if (zero_shards_) g_.get("dp")->all_reduce(ss)->wait();
    const double split_ss = sum_over(g_.get("tp"), ss.data<double>()[0]);
    norm = std::sqrt(sum_over(g_.get("pp"), split_ss + ss.data<double>()[1])) / grad_scale;
  }
  return {norm, optim::clip_factor(norm, max_norm)};
}

void GradSync::update(optim::Optimizer& opt) {
  if (zero_.empty()) return opt.step();
  NoGradGuard ng;
  if (!zero_shards_)  // ZeRO-1: the slices of the reduced gradients (ZeRO 2, 3: already sliced)
    for (ParamShard& z : zero_) {
      Tensor g = z.param.grad();
      z.shard.set_grad(g.defined() ? narrow(reshape(contiguous(g), {z.param.numel()}), 0, z.start, z.numel) : Tensor());
    }
  opt.step();
  for (ParamShard& z : zero_) z.shard.zero_grad();
  if (opts_.zero_stage >= 3) return;  // the slices are the parameters
  for (ParamShard& z : zero_) {  // every rank's updated slice to everyone: S(0) -> B
    Tensor whole =
        global::box_axis(contiguous(z.shard), global::Sbp::split(0), global::Sbp::broadcast(), {z.param.numel()}, *g_.ptr("dp"));
    Tensor flat = reshape(z.param, {z.param.numel()});
    copy_(flat, whole);
  }
}

void GradSync::count_memory(const std::function<void(const Tensor&, int64_t&)>& count, int64_t& params_bytes,
                            int64_t& grad_bytes) const {
  for (const auto& [name, p] : named_) count(p, params_bytes);
  for (const ParamShard& z : zero_) count(z.shard, params_bytes);
  for (const auto& [name, p] : named_) count(p.grad(), grad_bytes);
  if (zero_shards_)
    grad_bytes += zero_shards_->grad_segment_bytes();  // ZeRO 2, 3: the reduced slices' buffers
  else
    for (const ParamShard& z : zero_) count(z.shard.grad(), grad_bytes);
}

int64_t GradSync::buffer_peak_bytes() const { return zero_shards_ ? zero_shards_->buffer_peak_bytes() : 0; }

void GradSync::reset_buffer_peak() {
  if (zero_shards_) zero_shards_->reset_buffer_peak();
}

uint64_t GradSync::comm_bytes() const {
  // Every group this rank communicates on, each once: gradients (dp, dp x tp), the layers' tp
  // collectives, pipeline sends, the tied parameters' stages, the run-wide checks.
  std::vector<const comm::Communicator*> groups = {g_.get("dp"), g_.get("dp_cp"), g_.get("cp"), g_.get("stage"), g_.get("tp"),
                                                   g_.get("pp"), g_.get("tied"), g_.get("world")};
  for (const auto& [k, group] : tied_sums_) groups.push_back(group.get());
  uint64_t n = 0;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i] && std::find(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(i), groups[i]) ==
                         groups.begin() + static_cast<std::ptrdiff_t>(i))
      n += groups[i]->stats().total_bytes();
  return n;
}

const ParamShard* GradSync::shard_of(size_t k) const {
  for (const ParamShard& z : zero_)
    if (z.index == k) return &z;
  return nullptr;
}

}  // namespace mf::parallel
