// In-place optimizer update ops (AdamW, SGD): checks, then the registered fused kernel.
#include <cmath>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
void check_state(const char* op, const Tensor& param, const Tensor& t, const char* what) {
  detail::check_float(t, op, what);
  detail::check_same_dtype(param, t, op);
  MF_CHECK(t.shape() == param.shape() && t.is_contiguous(), op, ": ", what, " ", t.str(),
           " must be contiguous and shaped like the parameter ", param.str());
}
}  // namespace

void adamw_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                   double beta2, double eps, double weight_decay, int64_t step) {
  const char* op = "adamw_update_";
  detail::check_float(param, op, "param");
  MF_CHECK(param.is_contiguous(), op, ": param ", param.str(), " must be contiguous");
  MF_CHECK(!(grad_enabled() && param.requires_grad()), op, ": run optimizer updates under NoGradGuard");
  check_state(op, param, grad, "grad");
  check_state(op, param, exp_avg, "exp_avg");
  check_state(op, param, exp_avg_sq, "exp_avg_sq");
  MF_CHECK(step >= 1, op, ": step must be >= 1, got ", step);
  kernels::AdamWParams p{lr, beta1, beta2, eps, weight_decay, 1.0 - std::pow(beta1, static_cast<double>(step)),
                         1.0 - std::pow(beta2, static_cast<double>(step))};
  kernel<kernels::AdamWUpdate>("adamw_update", param.device(), param.dtype())(param, grad, exp_avg, exp_avg_sq, p);
}

void sgd_update_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                 double weight_decay) {
  const char* op = "sgd_update_";
  detail::check_float(param, op, "param");
  MF_CHECK(param.is_contiguous(), op, ": param ", param.str(), " must be contiguous");
  MF_CHECK(!(grad_enabled() && param.requires_grad()), op, ": run optimizer updates under NoGradGuard");
  check_state(op, param, grad, "grad");
  if (momentum != 0.0) check_state(op, param, momentum_buf, "momentum_buf");
  kernel<kernels::SgdUpdate>("sgd_update", param.device(), param.dtype())(param, grad, momentum_buf, lr, momentum,
                                                                         weight_decay);
}

}  // namespace mf
