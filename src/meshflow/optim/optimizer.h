// Optimizers over parameter groups (AdamW, SGD with momentum), global-norm gradient clipping.
// State is kept per parameter, named by the parameter's name, so it can be checkpointed.
//
// Mixed precision: for a bf16/f16 parameter the optimizer keeps an f32 master copy
// ("<param>.master" in state_tensors(), initialised from the parameter's value) and f32 state
// (Adam's moments). A step widens the gradient to f32, updates the master exactly as an f32
// parameter would be updated, and writes the master rounded to bf16/f16 into the parameter. The
// master belongs to the optimizer's parameter, so a view (ZeRO's flat slices) works as well as a
// whole parameter.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "meshflow/nn/module.h"

namespace mf::optim {

struct ParamGroup {
  std::vector<std::pair<std::string, Tensor>> params;
  double weight_decay = 0.0;
};

// Megatron/GPT-2 grouping: weight decay on matrices and embeddings, none on biases and norm
// weights (every parameter with fewer than 2 axes).
std::vector<ParamGroup> default_param_groups(const nn::Module& model, double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  void step();  // one update of every parameter that has a .grad (others are skipped)
  // Every gradient is multiplied by `s` (in f32 for bf16/f16 parameters) as it is used: the
  // inverse loss scale of fp16 training times the clipping factor. 1 (the default) changes
  // nothing. AdamW on the CPU multiplies inside its update pass.
  void set_grad_scale(double s) { grad_scale_ = s; }
  double grad_scale() const { return grad_scale_; }
  virtual std::string name() const = 0;
  void zero_grad();         // drops gradients (they are re-created by the next backward)
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  int64_t step_count() const { return step_; }
  // Optimizer state tensors by "<param name>.<state name>" (with "<param name>.master" for
  // bf16/f16 parameters), plus the step count.
  nn::NamedTensors state_tensors();
  // The f32 master copy of parameter `pi` of group `gi`, or an undefined tensor (f32/f64 ones).
  const Tensor& master(size_t gi, size_t pi) const { return master_.at(gi).at(pi); }
  void set_step_count(int64_t s) { step_ = s; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

 protected:
  Optimizer(std::vector<ParamGroup> groups, double lr);
  // Updates parameter `pi` of group `gi` from grad_scale x its gradient (under no-grad, step_
  // already counted). For a bf16/f16 parameter, `param` is its f32 master and `grad` the f32
  // gradient.
  virtual void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad, double grad_scale) = 0;
  virtual nn::NamedTensors slot_tensors() = 0;  // the optimizer's own state ("<param>.<slot>")
  // Zeros shaped like each parameter, in its compute dtype (f32 for bf16/f16), per group.
  std::vector<std::vector<Tensor>> zeros_like_params() const;
  // Multi-tensor updates. step() hands the parameters whose (device, compute dtype) an
  // optimizer says it can batch (supports_multi) to update_multi in batches of one device and
  // dtype, instead of calling update() for each; the others go through update() as before.
  // `param` is the parameter or its f32 master, `grad` the gradient, already times grad_scale().
  struct PendingUpdate {
    size_t gi, pi;
    Tensor param, grad;
  };
  virtual bool supports_multi(Device, DType) const { return false; }
  virtual void update_multi(const std::vector<PendingUpdate>&) {}
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<Tensor>> master_;  // [group][param]; undefined for f32/f64 parameters
  double lr_;
  double grad_scale_ = 1.0;
  int64_t step_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps);
  std::string name() const override { return "adamw"; }

 private:
  void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad, double grad_scale) override;
  // One "adamw_multi" kernel call per batch where the device has one (CUDA); bit-identical
  // to update() of each parameter.
  bool supports_multi(Device device, DType dtype) const override;
  void update_multi(const std::vector<PendingUpdate>& batch) override;
  nn::NamedTensors slot_tensors() override;
  double beta1_, beta2_, eps_;
  std::vector<std::vector<Tensor>> exp_avg_, exp_avg_sq_;  // [group][param], allocated eagerly
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, double lr, double momentum);
  std::string name() const override { return "sgd"; }

 private:
  void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad, double grad_scale) override;
  nn::NamedTensors slot_tensors() override;
  double momentum_;
  std::vector<std::vector<Tensor>> buf_;
};

// Scales all gradients so that their global norm is at most max_norm (no-op when max_norm <= 0);
// returns the norm before clipping (f64). `norm_type`: 2.0, the L2 norm (bf16/f16 gradients
// squared in f32, summed in f64), or +infinity, the largest |element| (PyTorch's and Megatron's
// norm_type=inf); anything else throws. Non-finite norms are returned as is and leave gradients
// untouched. `grad_scale`: the gradients hold grad_scale x the true ones (a loss scale): the norm
// returned and compared with max_norm is the true one (the gradients stay scaled).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double grad_scale = 1.0,
                      double norm_type = 2.0);
// clip_grad_norm in two halves: the norm it returns, and the factor it multiplies the gradients
// by (1 when max_norm <= 0, the norm is within it or not finite). A trainer hands the factor to
// the optimizer (set_grad_scale) instead of scaling the gradients in a pass of their own.
double grad_norm(const std::vector<Tensor>& params, double grad_scale = 1.0, double norm_type = 2.0);
double clip_factor(double norm, double max_norm);
// Throws unless norm_type is 2.0 or +infinity, naming `key` (the config key it came from).
void check_clip_norm_type(double norm_type, const char* key = "norm_type");
// The largest |element| of the tensors (f64; 0 for none), NaN when any element is NaN (infinite
// elements give +infinity). On a GPU the tensors are reduced there and read once.
double max_abs(const std::vector<Tensor>& tensors);

}  // namespace mf::optim
