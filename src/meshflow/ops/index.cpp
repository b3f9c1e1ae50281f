// embedding / index_select, gather, where / masked_fill. Indices are range-checked up front, on
// the host: an index on the GPU is copied to the host for the check (one synchronisation per
// call — for GPT-2 one per step, the embedding ids; an index on the host costs none and is
// uploaded asynchronously after the check). Indices may live on the host or on x's device.
#include "meshflow/ops/op_utils.h"

namespace mf {

namespace detail {
Tensor host_index(const Tensor& index) {
  // to() first: a GPU index crosses as it is (i32 moves half the bytes of i64), then the cast
  // and the range checks run on the host copy.
  return contiguous(cast(to(index.detach(), cpu_device()), DType::kI64));
}

Tensor device_index(const Tensor& index, const Tensor& host, Device device, const char* op, const char* what) {
  MF_CHECK(index.device() == device || index.device().type == DeviceType::kCPU, op, ": ", what, " ", index.str(),
           " must be on the host or on ", device.str());
  MF_CHECK(host.device().type == DeviceType::kCPU && host.dtype() == DType::kI64 && host.is_contiguous() &&
               host.shape() == index.shape(),
           op, ": internal: host copy ", host.str(), " of ", what, " ", index.str(), " is not a contiguous i64 host tensor");
  if (index.device() == device && index.dtype() == DType::kI64 && index.is_contiguous()) return index.detach();
  return to(host, device);  // asynchronous for a GPU (pinned staging); `host` itself on the CPU
}

Tensor checked_index(const Tensor& index, int64_t limit, Device device, const char* op, const char* what) {
  check_index(index, op, what);
  Tensor host = host_index(index);
  const int64_t* p = host.data<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i)
    MF_CHECK(p[i] >= 0 && p[i] < limit, op, ": ", what, " value ", p[i], " at flat position ", i,
             " is out of range [0, ", limit, ")");
  return device_index(index, host, device, op, what);
}
}  // namespace detail

namespace {
// (outer, n, inner) view of a contiguous tensor around `axis`.
Tensor three_d(const Tensor& t, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= t.shape(i);
  for (int64_t i = axis + 1; i < t.ndim(); ++i) inner *= t.shape(i);
  return make_view(t, {outer, t.shape(axis), inner}, {t.shape(axis) * inner, inner, 1}, t.offset());
}

// x (..., n, ...) along `ax`, idx (m) i64 already checked and on x's device -> (..., m, ...).
Tensor index_select_checked(const Tensor& x, int64_t ax, const Tensor& idx) {
  Tensor xc = contiguous(x.detach());
  Shape os = x.shape();
  os[ax] = idx.numel();
  Tensor out = empty(os, x.dtype(), x.device());
  kernel<kernels::IndexSelect>("index_select", x.device(), x.dtype())(three_d(xc, ax), idx, three_d(out, ax));
  Shape in_shape = x.shape();
  record("index_select", {x}, {out}, [idx, ax, in_shape](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor gc = contiguous(g[0]);
    // x a leaf whose .grad exists (a tied embedding: the output layer's gradient came first): its
    // rows are added there, not into a zero-filled table that would then be summed into it.
    if (const Tensor acc = accumulation_target(0, in_shape, gc.dtype(), gc.device()); acc.defined()) {
      kernel<kernels::IndexAdd>("index_add", gc.device(), gc.dtype())(three_d(gc, ax), idx, three_d(acc, ax));
      return {Tensor()};
    }
    Tensor dx = zeros(in_shape, gc.dtype(), gc.device());
    kernel<kernels::IndexAdd>("index_add", gc.device(), gc.dtype())(three_d(gc, ax), idx, three_d(dx, ax));
    return {dx};
  });
  return out;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  detail::check_defined(x, "index_select", "x");
  int64_t ax = normalize_axis(axis, x.ndim(), "index_select");
  MF_CHECK(index.defined() && index.ndim() == 1, "index_select: index must be 1-D, got ",
           index.defined() ? index.str() : "undefined");
  return index_select_checked(x, ax, detail::checked_index(index, x.shape(ax), x.device(), "index_select", "index"));
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  // bf16/f16 weights where the half kernels exist (CUDA): rows gathered as they are stored.
  const bool half_ok = detail::native_half(weight);
  detail::check_float(weight, "embedding", "weight", half_ok);
  MF_CHECK(weight.ndim() == 2, "embedding: weight ", weight.str(), " must be (num_embeddings, dim)");
  detail::check_index(ids, "embedding", "ids");
  Shape os = ids.shape();
  os.push_back(weight.shape(1));
  Tensor flat = reshape(detail::checked_index(ids, weight.shape(0), weight.device(), "embedding", "ids"), {-1});
  Tensor rows = index_select_checked(weight, 0, flat);
  return reshape(rows, os);
}

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  detail::check_defined(x, "gather", "x");
  int64_t ax = normalize_axis(axis, x.ndim(), "gather");
  MF_CHECK(index.defined() && index.ndim() == x.ndim(), "gather: index ", index.defined() ? index.str() : "undefined",
           " must have the rank of x ", x.str());
  for (int64_t d = 0; d < x.ndim(); ++d)
    MF_CHECK(d == ax || index.shape(d) == x.shape(d), "gather: index ", index.str(), " and x ", x.str(),
             " differ on axis ", d);
  Tensor idx = detail::checked_index(index, x.shape(ax), x.device(), "gather", "index");
  Tensor xc = contiguous(x.detach());
  Tensor out = empty(index.shape(), x.dtype(), x.device());
  kernel<kernels::Gather>("gather", x.device(), x.dtype())(three_d(xc, ax), three_d(idx, ax), three_d(out, ax));
  Shape in_shape = x.shape();
  record("gather", {x}, {out}, [idx, ax, in_shape](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor gc = contiguous(g[0]);
    Tensor dx = zeros(in_shape, gc.dtype(), gc.device());
    kernel<kernels::ScatterAdd>("scatter_add", gc.device(), gc.dtype())(three_d(gc, ax), three_d(idx, ax),
                                                                        three_d(dx, ax));
    return {dx};
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined(cond, "where", "cond");
  MF_CHECK(cond.dtype() == DType::kBool, "where: cond ", cond.str(), " must be bool");
  MF_CHECK(!a.defined() || cond.device() == a.device(), "where: cond ", cond.str(), " is not on the device of a ",
           a.str());
  detail::check_defined(a, "where", "a");
  detail::check_defined(b, "where", "b");
  detail::check_same_dtype(a, b, "where");
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor c = contiguous(expand(cond.detach(), shape));
  Tensor ac = contiguous(expand(a.detach(), shape)), bc = contiguous(expand(b.detach(), shape));
  Tensor out = empty(shape, a.dtype(), a.device());
  kernel<kernels::Where>("where", a.device(), a.dtype())(c, ac, bc, out);
  if (!any_requires_grad({a, b})) return out;
  Shape as = a.shape(), bs = b.shape();
  bool ga = a.requires_grad(), gb = b.requires_grad();
  record("where", {a, b}, {out}, [c, as, bs, ga, gb](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor z = zeros(g[0].shape(), g[0].dtype(), g[0].device());
    Tensor da, db;
    if (ga) da = sum_to(where(c, g[0], z), as);
    if (gb) db = sum_to(where(c, z, g[0]), bs);
    return {da, db};
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  detail::check_defined(x, "masked_fill", "x");
  return where(mask, full({}, value, x.dtype(), x.device()), x);
}

}  // namespace mf
