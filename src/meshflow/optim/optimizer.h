// Optimizers over parameter groups (AdamW, SGD with momentum), global-norm gradient clipping.
// State is kept per parameter, named by the parameter's name, so it can be checkpointed.
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
  virtual std::string name() const = 0;
  void zero_grad();         // drops gradients (they are re-created by the next backward)
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  int64_t step_count() const { return step_; }
  // Optimizer state tensors by "<param name>.<state name>", plus the step count.
  virtual nn::NamedTensors state_tensors() = 0;
  void set_step_count(int64_t s) { step_ = s; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

 protected:
  explicit Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)), lr_(lr) {}
  // Updates parameter `pi` of group `gi` from its gradient (under no-grad, step_ already counted).
  virtual void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad) = 0;
  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t step_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps);
  std::string name() const override { return "adamw"; }
  nn::NamedTensors state_tensors() override;

 private:
  void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad) override;
  double beta1_, beta2_, eps_;
  std::vector<std::vector<Tensor>> exp_avg_, exp_avg_sq_;  // [group][param], allocated eagerly
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, double lr, double momentum);
  std::string name() const override { return "sgd"; }
  nn::NamedTensors state_tensors() override;

 private:
  void update(size_t gi, size_t pi, Tensor& param, const Tensor& grad) override;
  double momentum_;
  std::vector<std::vector<Tensor>> buf_;
};

// Scales all gradients so that their global L2 norm is at most max_norm (no-op when
// max_norm <= 0); returns the norm before clipping (f64). Non-finite norms are returned as is
// and leave gradients untouched.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace mf::optim
