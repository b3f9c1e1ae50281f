// cross_entropy: checks (targets range-checked before any compute), the fused kernel and the
// mean over rows whose target is not ignore_index.
//
// Dtypes: f32/f64 logits compute in their dtype. bf16/f16 logits (where the half kernels exist:
// CUDA) are read as they are stored and the kernels compute in f32: the per-row losses, the
// log-sum-exp and the returned loss are f32 (compute_dtype), the logits' gradient is bf16/f16.
//
// Targets are range-checked and counted on the host: targets on the host cost nothing more
// (they are uploaded asynchronously for a GPU kernel), targets on a GPU are copied to the host
// first (a synchronisation). The backward multiplies by its incoming gradient (a scalar) on the
// host when it is there, else on the device (no synchronisation).
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  constexpr const char* kOp = "cross_entropy";
  const bool half_ok = detail::native_half(logits);
  detail::check_float(logits, kOp, "logits", half_ok);
  MF_CHECK(logits.ndim() == 2, kOp, ": logits ", logits.str(), " must be (N, V)");
  detail::check_index(targets, kOp, "targets");
  MF_CHECK(targets.ndim() == 1 && targets.shape(0) == logits.shape(0), kOp, ": targets ", targets.str(),
           " must be (N) for logits ", logits.str());
  MF_CHECK(targets.device() == logits.device() || targets.device().type == DeviceType::kCPU, kOp, ": targets ",
           targets.str(), " must be on the host or on the device of logits ", logits.str());
  MF_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, kOp, ": label_smoothing must be in [0, 1], got ",
           label_smoothing);
  const int64_t N = logits.shape(0), V = logits.shape(1);
  MF_CHECK(V > 0 || N == 0, kOp, ": logits ", logits.str(), " have no classes");
  Tensor host = detail::host_index(targets);
  const int64_t* tp = host.data<int64_t>();
  int64_t n_valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (tp[i] == ignore_index) continue;
    MF_CHECK(tp[i] >= 0 && tp[i] < V, kOp, ": target value ", tp[i], " at position ", i, " is out of range [0, ", V,
             ") (ignore_index ", ignore_index, ") for logits ", logits.str());
    ++n_valid;
  }
  Tensor tgt = detail::device_index(targets, host, logits.device(), kOp, "targets");  // (N) i64 on logits' device
  Tensor x = contiguous(logits.detach());
  const DType stat_dt = compute_dtype(x.dtype());  // f32 for bf16/f16 logits
  Tensor loss_rows = empty({N}, stat_dt, x.device());
  Tensor lse = empty({N}, stat_dt, x.device());
  kernel<kernels::CrossEntropyForward>("cross_entropy_forward", x.device(), x.dtype())(x, tgt, ignore_index,
                                                                                      label_smoothing, loss_rows, lse);
  Tensor out;
  {
    NoGradGuard ng;
    out = n_valid == 0 ? zeros({}, stat_dt, x.device()) : scale(sum(loss_rows), 1.0 / static_cast<double>(n_valid));
  }
  if (!any_requires_grad({logits})) return out;
  record(kOp, {logits}, {out},
         [x, tgt, lse, ignore_index, label_smoothing, n_valid](const std::vector<Tensor>& g) -> std::vector<Tensor> {
           // The incoming gradient is a scalar. On the host it folds into the kernel's scale; on a
           // device, reading it would synchronise (once per loss chunk), so the kernel scales by
           // 1/n_valid and the product with it stays on the device.
           const bool on_host = g[0].device().type == DeviceType::kCPU;
           double gs = n_valid == 0 ? 0.0 : (on_host ? g[0].item() : 1.0) / static_cast<double>(n_valid);
           Tensor dx = empty(x.shape(), x.dtype(), x.device());
           kernel<kernels::CrossEntropyBackward>("cross_entropy_backward", x.device(), x.dtype())(
               x, tgt, lse, ignore_index, label_smoothing, gs, dx);
           if (on_host || n_valid == 0) return {dx};
           Tensor gd = to(g[0], dx.device());  // the loss dtype: f32 for half logits, kept exact
           if (gd.dtype() == dx.dtype()) return {mul(dx, gd)};
           return {cast(mul(cast(dx, gd.dtype()), gd), dx.dtype())};
         });
  return out;
}

}  // namespace mf
