#include "meshflow/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"

namespace mf::optim {

std::vector<ParamGroup> default_param_groups(const nn::Module& model, double weight_decay) {
  ParamGroup decay{{}, weight_decay}, no_decay{{}, 0.0};
  for (auto& [name, p] : model.named_parameters()) (p.ndim() >= 2 ? decay : no_decay).params.emplace_back(name, p);
  return {decay, no_decay};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)), lr_(lr) {
  NoGradGuard ng;
  for (const auto& g : groups_) {
    master_.emplace_back();
    for (const auto& [name, p] : g.params)
      master_.back().push_back(is_half(p.dtype()) ? cast(p.detach(), compute_dtype(p.dtype())) : Tensor());
  }
}

namespace {
// A multi-tensor batch is run once it holds this many elements (bounds the f32 gradient copies
// of mixed precision kept alive until the batch runs).
constexpr int64_t kMultiBatchElements = int64_t{1} << 26;
}  // namespace

void Optimizer::step() {
  NoGradGuard ng;
  ++step_;
  struct Batch {
    Device device;
    DType dtype;
    std::vector<PendingUpdate> items;
    int64_t numel = 0;
  };
  std::vector<Batch> batches;
  auto run_batch = [&](Batch& b) {
    if (b.items.empty()) return;
    update_multi(b.items);
    for (const PendingUpdate& u : b.items)
      if (master_[u.gi][u.pi].defined()) {
        Tensor p = groups_[u.gi].params[u.pi].second;
        copy_(p, cast(u.param, p.dtype()));
      }
    b.items.clear();
    b.numel = 0;
  };
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
      Tensor p = groups_[gi].params[pi].second;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      // Mixed precision: the f32 master takes the f32 update; the parameter its rounding.
      Tensor m = master_[gi][pi];
      Tensor target = m.defined() ? m : p;
      const bool multi = supports_multi(target.device(), target.dtype());
      Tensor grad = m.defined() ? cast(g, m.dtype()) : g;
      double fold = 1.0;  // the scale update() applies as it reads the gradient
      if (grad_scale_ != 1.0 && !multi)
        fold = grad_scale_;
      else if (grad_scale_ != 1.0 && m.defined())
        scale_(grad, grad_scale_);
      else if (grad_scale_ != 1.0)
        grad = scale(g, grad_scale_);
      if (multi) {
        auto it = std::find_if(batches.begin(), batches.end(), [&](const Batch& b) {
          return b.device == target.device() && b.dtype == target.dtype();
        });
        if (it == batches.end()) it = batches.insert(batches.end(), Batch{target.device(), target.dtype(), {}, 0});
        it->items.push_back({gi, pi, target, grad});
        it->numel += target.numel();
        if (it->numel >= kMultiBatchElements) run_batch(*it);
        continue;
      }
      update(gi, pi, target, grad, fold);
      if (m.defined()) copy_(p, cast(m, p.dtype()));
    }
  for (Batch& b : batches) run_batch(b);
}

nn::NamedTensors Optimizer::state_tensors() {
  nn::NamedTensors r = slot_tensors();
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi)
      if (master_[gi][pi].defined()) r.emplace_back(groups_[gi].params[pi].first + ".master", master_[gi][pi]);
  return r;
}

std::vector<std::vector<Tensor>> Optimizer::zeros_like_params() const {
  std::vector<std::vector<Tensor>> r;
  for (const auto& g : groups_) {
    r.emplace_back();
    for (const auto& [name, p] : g.params) r.back().push_back(zeros(p.shape(), compute_dtype(p.dtype()), p.device()));
  }
  return r;
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& [name, p] : g.params) p.zero_grad();
}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps)
    : Optimizer(std::move(groups), lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  MF_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "adamw: betas must be in [0, 1), got [", beta1, ", ",
           beta2, "]");
  MF_CHECK(eps > 0, "adamw: eps must be positive, got ", eps);
  exp_avg_ = zeros_like_params();
  exp_avg_sq_ = zeros_like_params();
}

void AdamW::update(size_t gi, size_t pi, Tensor& p, const Tensor& g, double grad_scale) {
  adamw_update_(p, g, exp_avg_[gi][pi], exp_avg_sq_[gi][pi], lr_, beta1_, beta2_, eps_, groups_[gi].weight_decay, step_,
                grad_scale);
}

bool AdamW::supports_multi(Device device, DType dtype) const { return has_adamw_multi(device, dtype); }

void AdamW::update_multi(const std::vector<PendingUpdate>& batch) {
  std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<double> weight_decays;
  for (const PendingUpdate& u : batch) {
    params.push_back(u.param);
    grads.push_back(u.grad);
    exp_avgs.push_back(exp_avg_[u.gi][u.pi]);
    exp_avg_sqs.push_back(exp_avg_sq_[u.gi][u.pi]);
    weight_decays.push_back(groups_[u.gi].weight_decay);
  }
  adamw_multi_update_(params, grads, exp_avgs, exp_avg_sqs, lr_, beta1_, beta2_, eps_, weight_decays, step_);
}

nn::NamedTensors AdamW::slot_tensors() {
  nn::NamedTensors r;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
      r.emplace_back(groups_[gi].params[pi].first + ".exp_avg", exp_avg_[gi][pi]);
      r.emplace_back(groups_[gi].params[pi].first + ".exp_avg_sq", exp_avg_sq_[gi][pi]);
    }
  return r;
}

Sgd::Sgd(std::vector<ParamGroup> groups, double lr, double momentum)
    : Optimizer(std::move(groups), lr), momentum_(momentum) {
  MF_CHECK(momentum >= 0, "sgd: momentum must be >= 0, got ", momentum);
  if (momentum > 0) buf_ = zeros_like_params();
}

void Sgd::update(size_t gi, size_t pi, Tensor& p, const Tensor& g, double grad_scale) {
  Tensor buf = momentum_ > 0 ? buf_[gi][pi] : Tensor();
  sgd_update_(p, grad_scale != 1.0 ? scale(g, grad_scale) : g, buf, lr_, momentum_, groups_[gi].weight_decay);
}

nn::NamedTensors Sgd::slot_tensors() {
  nn::NamedTensors r;
  if (momentum_ > 0)
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi)
        r.emplace_back(groups_[gi].params[pi].first + ".momentum_buffer", buf_[gi][pi]);
  return r;
}

void check_clip_norm_type(double norm_type, const char* key) {
  MF_CHECK(norm_type == 2.0 || norm_type == std::numeric_limits<double>::infinity(), key, " must be 2.0 (the L2 norm) or ",
           ".inf (the largest |gradient element|), got ", norm_type);
}

double max_abs(const std::vector<Tensor>& tensors) {
  NoGradGuard ng;
  // Per tensor max(x) and max(-x) (exact, any device), gathered and reduced once. A max skips
  // NaN, so NaN is found through the sum of squares (NaN exactly when an element is).
  std::vector<Tensor> peaks;
  Tensor squares;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    Tensor flat = reshape(contiguous(t.detach()), {t.numel()});
    if (is_half(flat.dtype())) flat = cast(flat, DType::kF32);
    peaks.push_back(reshape(cast(max(flat, 0), DType::kF64), {1}));
    peaks.push_back(reshape(cast(max(neg(flat), 0), DType::kF64), {1}));
    Tensor s = cast(sum_squares(flat), DType::kF64);
    squares = squares.defined() ? add(squares, s) : s;
  }
  if (peaks.empty()) return 0.0;
  if (std::isnan(squares.item())) return std::numeric_limits<double>::quiet_NaN();
  return max(cat(peaks, 0), 0).item();
}

double clip_factor(double norm, double max_norm) {
  return max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double grad_scale, double norm_type) {
  const double norm = grad_norm(params, grad_scale, norm_type), s = clip_factor(norm, max_norm);
  NoGradGuard ng;
  if (s != 1.0)
    for (const auto& p : params) {
      Tensor g = p.grad();
      if (g.defined()) scale_(g, s);
    }
  return norm;
}

double grad_norm(const std::vector<Tensor>& params, double grad_scale, double norm_type) {
  check_clip_norm_type(norm_type);
  NoGradGuard ng;
  double norm = 0.0;
  if (norm_type == 2.0) {
    double ss = 0.0;
    for (const auto& p : params)
      if (p.grad().defined()) ss += sum_squares(p.grad()).item();
    norm = std::sqrt(ss) / grad_scale;
  } else {
    std::vector<Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad());
    norm = max_abs(grads) / grad_scale;
  }
  return norm;
}

}  // namespace mf::optim
