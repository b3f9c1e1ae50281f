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

kernels::AdamWParams adamw_params(double lr, double beta1, double beta2, double eps, double weight_decay,
                                  int64_t step) {
  return {lr, beta1, beta2, eps, weight_decay, 1.0 - std::pow(beta1, static_cast<double>(step)),
          1.0 - std::pow(beta2, static_cast<double>(step))};
}
}  // namespace

void adamw_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                   double beta2, double eps, double weight_decay, int64_t step, double grad_scale) {
  const char* op = "adamw_update_";
  detail::check_float(param, op, "param");
  MF_CHECK(param.is_contiguous(), op, ": param ", param.str(), " must be contiguous");
  MF_CHECK(!(grad_enabled() && param.requires_grad()), op, ": run optimizer updates under NoGradGuard");
  check_state(op, param, grad, "grad");
  check_state(op, param, exp_avg, "exp_avg");
  check_state(op, param, exp_avg_sq, "exp_avg_sq");
  MF_CHECK(step >= 1, op, ": step must be >= 1, got ", step);
  kernels::AdamWParams p = adamw_params(lr, beta1, beta2, eps, weight_decay, step);
  if (grad_scale != 1.0 && param.device().type != DeviceType::kCPU) {  // the CPU kernel folds it in
    kernel<kernels::AdamWUpdate>("adamw_update", param.device(), param.dtype())(param, scale(grad, grad_scale), exp_avg,
                                                                               exp_avg_sq, p);
    return;
  }
  p.grad_scale = grad_scale;
  kernel<kernels::AdamWUpdate>("adamw_update", param.device(), param.dtype())(param, grad, exp_avg, exp_avg_sq, p);
}

bool has_adamw_multi(Device device, DType dtype) { return kernel_registry().has("adamw_multi", device.type, dtype); }

void adamw_multi_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs, double lr,
                         double beta1, double beta2, double eps, const std::vector<double>& weight_decays,
                         int64_t step) {
  const char* op = "adamw_multi_update_";
  const size_t n = params.size();
  MF_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && weight_decays.size() == n, op, ": ",
           n, " params with ", grads.size(), " grads, ", exp_avgs.size(), " exp_avg, ", exp_avg_sqs.size(),
           " exp_avg_sq and ", weight_decays.size(), " weight decays");
  if (n == 0) return;
  MF_CHECK(step >= 1, op, ": step must be >= 1, got ", step);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& param = params[i];
    detail::check_float(param, op, "param");
    MF_CHECK(param.is_contiguous(), op, ": param ", param.str(), " must be contiguous");
    MF_CHECK(param.device() == params[0].device() && param.dtype() == params[0].dtype(), op, ": param ", param.str(),
             " on ", param.device().str(), " does not match the first param ", params[0].str(), " on ",
             params[0].device().str());
    MF_CHECK(!(grad_enabled() && param.requires_grad()), op, ": run optimizer updates under NoGradGuard");
    check_state(op, param, grads[i], "grad");
    check_state(op, param, exp_avgs[i], "exp_avg");
    check_state(op, param, exp_avg_sqs[i], "exp_avg_sq");
  }
  // weight_decay of the params struct is unused: each tensor has its own.
  kernels::AdamWParams p = adamw_params(lr, beta1, beta2, eps, 0.0, step);
  kernel<kernels::AdamWMulti>("adamw_multi", params[0].device(), params[0].dtype())(params, grads, exp_avgs,
                                                                                   exp_avg_sqs, weight_decays, p);
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
