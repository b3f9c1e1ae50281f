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

// A source on another device (host <-> GPU) is first copied to dst's device with to().
void copy_(Tensor& dst, const Tensor& src) {
  check_writable(dst, "copy_");
  detail::check_defined(src, "copy_", "src");
  MF_CHECK(dst.dtype() == src.dtype(), "copy_: dtype mismatch, ", dst.str(), " vs ", src.str());
  MF_CHECK(dst.shape() == src.shape(), "copy_: shape mismatch, dst ", dst.str(), " src ", src.str());
  const Tensor s = src.device() == dst.device() ? src : to(src.detach(), dst.device());
  kernel<kernels::Copy>("copy", dst.device(), dst.dtype())(s, dst);
}

// bf16/f16 destinations (gradient accumulation and scaling under mixed precision): natively
// where the half kernel is registered (CUDA: f32 arithmetic, one rounding into dst), else
// computed in f32 and rounded once back into dst (the same arithmetic).
void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_writable(dst, "add_");
  const bool half_ok = detail::native_half(dst);
  if (!half_ok && is_half(dst.dtype()) && src.defined() && src.dtype() == dst.dtype()) {
    MF_CHECK(dst.shape() == src.shape(), "add_: shape mismatch, dst ", dst.str(), " src ", src.str());
    Tensor wide = cast(dst, DType::kF32);
    add_(wide, cast(src.detach(), DType::kF32), alpha);
    copy_(dst, cast(wide, dst.dtype()));
    return;
  }
  detail::check_float(src, "add_", "src", half_ok);
  detail::check_same_dtype(dst, src, "add_");
  MF_CHECK(dst.shape() == src.shape(), "add_: shape mismatch, dst ", dst.str(), " src ", src.str());
  MF_CHECK(dst.is_contiguous(), "add_: dst ", dst.str(), " must be contiguous");
  kernel<kernels::AddInplace>("add_inplace", dst.device(), dst.dtype())(dst, contiguous(src.detach()), alpha);
}

void scale_(Tensor& dst, double s) {
  check_writable(dst, "scale_");
  const bool half_ok = detail::native_half(dst);
  if (!half_ok && is_half(dst.dtype())) {
    Tensor wide = cast(dst, DType::kF32);
    scale_(wide, s);
    copy_(dst, cast(wide, dst.dtype()));
    return;
  }
  detail::check_float(dst, "scale_", "dst", half_ok);
  MF_CHECK(dst.is_contiguous(), "scale_: dst ", dst.str(), " must be contiguous");
  kernel<kernels::Unary>("unary", dst.device(), dst.dtype())(kernels::UnaryOp::kScale, s, dst, dst);
}

}  // namespace mf
