// In-place updates (optimizer steps, gradient accumulation). Never recorded by autograd.
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {
void check_writable(const Tensor& dst, const char* op) {
  detail::check_defined(dst, op, "dst");
  MF_CHECK(!(grad_enabled() && dst.requires_grad()), op, ": in-place update of ", dst.str(),
           " which requires grad, with grad mode on; wrap it in NoGradGuard");
}
}  // namespace

void fill_(Tensor& dst, double value) {
  check_writable(dst, "fill_");
  kernel<kernels::Fill>("fill", dst.device(), dst.dtype())(dst, value);
}

void copy_(Tensor& dst, const Tensor& src) {
  check_writable(dst, "copy_");
  detail::check_defined(src, "copy_", "src");
  detail::check_same_dtype(dst, src, "copy_");
  MF_CHECK(dst.shape() == src.shape(), "copy_: shape mismatch, dst ", dst.str(), " src ", src.str());
  kernel<kernels::Copy>("copy", dst.device(), dst.dtype())(src, dst);
}

// bf16/f16 destinations (gradient accumulation and scaling under mixed precision) are
// computed in f32 and rounded once back into dst.
void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_writable(dst, "add_");
  if (is_half(dst.dtype()) && src.defined() && src.dtype() == dst.dtype()) {
    MF_CHECK(dst.shape() == src.shape(), "add_: shape mismatch, dst ", dst.str(), " src ", src.str());
    Tensor wide = cast(dst, DType::kF32);
    add_(wide, cast(src.detach(), DType::kF32), alpha);
    copy_(dst, cast(wide, dst.dtype()));
    return;
  }
  detail::check_float(src, "add_", "src");
  detail::check_same_dtype(dst, src, "add_");
  MF_CHECK(dst.shape() == src.shape(), "add_: shape mismatch, dst ", dst.str(), " src ", src.str());
  MF_CHECK(dst.is_contiguous(), "add_: dst ", dst.str(), " must be contiguous");
  kernel<kernels::AddInplace>("add_inplace", dst.device(), dst.dtype())(dst, contiguous(src.detach()), alpha);
}

void scale_(Tensor& dst, double s) {
  check_writable(dst, "scale_");
  if (is_half(dst.dtype())) {
    Tensor wide = cast(dst, DType::kF32);
    scale_(wide, s);
    copy_(dst, cast(wide, dst.dtype()));
    return;
  }
  detail::check_float(dst, "scale_", "dst");
  MF_CHECK(dst.is_contiguous(), "scale_: dst ", dst.str(), " must be contiguous");
  kernel<kernels::Unary>("unary", dst.device(), dst.dtype())(kernels::UnaryOp::kScale, s, dst, dst);
}

}  // namespace mf
