// cross_entropy: checks (targets range-checked before any compute), the fused kernel and the
// mean over rows whose target is not ignore_index.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  constexpr const char* kOp = "cross_entropy";
  detail::check_float(logits, kOp, "logits");
  MF_CHECK(logits.ndim() == 2, kOp, ": logits ", logits.str(), " must be (N, V)");
  detail::check_index(targets, kOp, "targets");
  MF_CHECK(targets.ndim() == 1 && targets.shape(0) == logits.shape(0), kOp, ": targets ", targets.str(),
           " must be (N) for logits ", logits.str());
  MF_CHECK(targets.device() == logits.device(), kOp, ": targets ", targets.str(), " and logits ", logits.str(),
           " are on different devices");
  MF_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, kOp, ": label_smoothing must be in [0, 1], got ",
           label_smoothing);
  const int64_t N = logits.shape(0), V = logits.shape(1);
  MF_CHECK(V > 0 || N == 0, kOp, ": logits ", logits.str(), " have no classes");
  Tensor tgt = contiguous(cast(targets.detach(), DType::kI64));
  const int64_t* tp = tgt.data<int64_t>();
  int64_t n_valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (tp[i] == ignore_index) continue;
    MF_CHECK(tp[i] >= 0 && tp[i] < V, kOp, ": target value ", tp[i], " at position ", i, " is out of range [0, ", V,
             ") (ignore_index ", ignore_index, ") for logits ", logits.str());
    ++n_valid;
  }
  Tensor x = contiguous(logits.detach());
  Tensor loss_rows = empty({N}, x.dtype(), x.device());
  Tensor lse = empty({N}, x.dtype(), x.device());
  kernel<kernels::CrossEntropyForward>("cross_entropy_forward", x.device(), x.dtype())(x, tgt, ignore_index,
                                                                                      label_smoothing, loss_rows, lse);
  Tensor out;
  {
    NoGradGuard ng;
    out = n_valid == 0 ? zeros({}, x.dtype(), x.device()) : scale(sum(loss_rows), 1.0 / static_cast<double>(n_valid));
  }
  if (!any_requires_grad({logits})) return out;
  record(kOp, {logits}, {out},
         [x, tgt, lse, ignore_index, label_smoothing, n_valid](const std::vector<Tensor>& g) -> std::vector<Tensor> {
           double gs = n_valid == 0 ? 0.0 : g[0].item() / static_cast<double>(n_valid);
           Tensor dx = empty(x.shape(), x.dtype(), x.device());
           kernel<kernels::CrossEntropyBackward>("cross_entropy_backward", x.device(), x.dtype())(
               x, tgt, lse, ignore_index, label_smoothing, gs, dx);
           return {dx};
         });
  return out;
}

}  // namespace mf
