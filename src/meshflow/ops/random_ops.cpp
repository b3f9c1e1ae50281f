// dropout and random initialisation, drawing from Philox streams of a Generator. bf16/f16
// tensors run natively where the half kernel is registered (CUDA); the CPU refuses them.
#include "meshflow/ops/op_utils.h"

namespace mf {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen, const LogicalSlice& slice) {
  detail::check_float(x, "dropout", "x", detail::native_half(x));
  MF_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  Generator& g = gen ? *gen : default_generator();
  uint64_t seed = g.seed(), stream = g.take_stream();
  // A whole piece inside a data-parallel batch slice draws its rows' numbers (batch_slice.h).
  LogicalSlice where = slice.whole() ? batch_logical_slice(x.shape(), "dropout") : slice;
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::Dropout>("dropout", x.device(), x.dtype())(contiguous(x.detach()), out, p, seed, stream, where);
  record("dropout", {x}, {out}, [p, seed, stream, slice = where](const std::vector<Tensor>& gr) -> std::vector<Tensor> {
    Tensor gc = contiguous(gr[0]);
    Tensor dx = empty(gc.shape(), gc.dtype(), gc.device());
    kernel<kernels::Dropout>("dropout", gc.device(), gc.dtype())(gc, dx, p, seed, stream, slice);
    return {dx};
  });
  return out;
}

namespace {
void random_fill(Tensor& t, bool normal, double a, double b, Generator* gen, const LogicalSlice& slice, const char* op) {
  detail::check_float(t, op, "tensor", detail::native_half(t));
  MF_CHECK(t.is_contiguous(), op, ": tensor ", t.str(), " must be contiguous");
  MF_CHECK(!(grad_enabled() && t.requires_grad()), op, ": in-place init of ", t.str(),
           " which requires grad, with grad mode on; wrap it in NoGradGuard");
  Generator& g = gen ? *gen : default_generator();
  uint64_t stream = g.take_stream();
  kernel<kernels::RandomFill>("random_fill", t.device(), t.dtype())(t, normal, a, b, g.seed(), stream, slice);
}
}  // namespace

void normal_(Tensor& t, double mean, double stddev, Generator* gen, const LogicalSlice& slice) {
  random_fill(t, true, mean, stddev, gen, slice, "normal_");
}
void uniform_(Tensor& t, double low, double high, Generator* gen, const LogicalSlice& slice) {
  random_fill(t, false, low, high, gen, slice, "uniform_");
}

}  // namespace mf
