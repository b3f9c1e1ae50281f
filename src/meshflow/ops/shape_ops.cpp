// Views and copies that change shape: reshape/view, permute, narrow, expand, cat, split, unbind.
#include <algorithm>
#include <numeric>
#include <optional>

#include "meshflow/ops/op_utils.h"

namespace mf {

namespace {

// Strides for viewing (shape, strides) as new_shape without a copy, if possible
// (groups of old axes that are mutually contiguous map onto groups of new axes).
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& new_shape) {
  if (shape.empty() || shape_numel(shape) == 0) return contiguous_strides(new_shape);
  Strides out(new_shape.size());
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MF_CHECK(infer < 0, op, ": more than one -1 in shape ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      MF_CHECK(out[i] >= 0, op, ": invalid size in shape ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    MF_CHECK(known != 0 && numel % known == 0, op, ": cannot infer -1 in ", shape_str(shape), " for ", numel,
             " elements");
    out[infer] = numel / known;
  }
  MF_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(shape), " has ", shape_numel(out),
           " elements, the tensor has ", numel);
  return out;
}

Tensor record_reshape(const Tensor& x, Tensor out, const char* name) {
  Shape in_shape = x.shape();
  record(name, {x}, {out}, [in_shape](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {reshape(g[0], in_shape)};
  });
  return out;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "view", "x");
  Shape s = infer_shape(shape, x.numel(), "view");
  auto st = view_strides(x.shape(), x.strides(), s);
  MF_CHECK(st.has_value(), "view: cannot view ", x.str(), " with strides ", shape_str(x.strides()), " as ",
           shape_str(s), " without a copy; use reshape");
  return record_reshape(x, make_view(x, s, *st, x.offset()), "view");
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "reshape", "x");
  Shape s = infer_shape(shape, x.numel(), "reshape");
  auto st = view_strides(x.shape(), x.strides(), s);
  if (st) return record_reshape(x, make_view(x, s, *st, x.offset()), "reshape");
  Tensor c = contiguous(x.detach());
  return record_reshape(x, make_view(c, s, contiguous_strides(s), c.offset()), "reshape");
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  detail::check_defined(x, "permute", "x");
  int64_t nd = x.ndim();
  MF_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute: ", dims.size(), " dims for ", x.str());
  Shape s(nd);
  Strides st(nd);
  std::vector<int64_t> inverse(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = normalize_axis(dims[i], nd, "permute");
    MF_CHECK(inverse[d] < 0, "permute: axis ", d, " repeated in dims for ", x.str());
    inverse[d] = i;
    s[i] = x.shape()[d];
    st[i] = x.strides()[d];
  }
  Tensor out = make_view(x, s, st, x.offset());
  record("permute", {x}, {out}, [inverse](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {permute(g[0], inverse)};
  });
  return out;
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  detail::check_defined(x, "transpose", "x");
  std::vector<int64_t> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_axis(a, x.ndim(), "transpose")], dims[normalize_axis(b, x.ndim(), "transpose")]);
  return permute(x, dims);
}

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length) {
  detail::check_defined(x, "narrow", "x");
  int64_t ax = normalize_axis(axis, x.ndim(), "narrow");
  int64_t n = x.shape()[ax];
  MF_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: [", start, ", ", start + length,
           ") out of range for axis ", ax, " of ", x.str());
  Shape s = x.shape();
  s[ax] = length;
  Tensor out = make_view(x, s, x.strides(), x.offset() + start * x.strides()[ax]);
  Shape in_shape = x.shape();
  DType dt = x.dtype();
  Device dev = x.device();
  record("narrow", {x}, {out}, [in_shape, dt, dev, ax, start, length](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor dx = zeros(in_shape, dt, dev);
    Tensor slot = narrow(dx, ax, start, length);
    copy_(slot, g[0]);
    return {dx};
  });
  return out;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "expand", "x");
  int64_t nd = static_cast<int64_t>(shape.size()), xd = x.ndim();
  MF_CHECK(nd >= xd, "expand: cannot expand ", x.str(), " to fewer axes ", shape_str(shape));
  Strides st(nd, 0);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t j = i - (nd - xd);
    if (j < 0) continue;
    int64_t d = x.shape()[j];
    MF_CHECK(d == shape[i] || d == 1, "expand: cannot expand ", x.str(), " to ", shape_str(shape));
    st[i] = d == 1 && shape[i] != 1 ? 0 : x.strides()[j];
  }
  if (shape == x.shape()) return x;
  Tensor out = make_view(x, shape, st, x.offset());
  Shape in_shape = x.shape();
  record("expand", {x}, {out}, [in_shape](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {sum_to(g[0], in_shape)};
  });
  return out;
}

Tensor unsqueeze(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "unsqueeze", "x");
  int64_t ax = normalize_axis(axis, x.ndim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + ax, 1);
  return view(x, s);
}

Tensor squeeze(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "squeeze", "x");
  int64_t ax = normalize_axis(axis, x.ndim(), "squeeze");
  MF_CHECK(x.shape()[ax] == 1, "squeeze: axis ", ax, " of ", x.str(), " is not 1");
  Shape s = x.shape();
  s.erase(s.begin() + ax);
  return view(x, s);
}

Tensor contiguous(const Tensor& x) {
  detail::check_defined(x, "contiguous", "x");
  if (x.is_contiguous()) return x;
  return clone(x);
}

Tensor clone(const Tensor& x) {
  detail::check_defined(x, "clone", "x");
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  kernel<kernels::Copy>("copy", x.device(), x.dtype())(x, out);
  record("clone", {x}, {out}, [](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {g[0]}; });
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int64_t axis) {
  MF_CHECK(!xs.empty(), "cat: no tensors given");
  for (const auto& t : xs) detail::check_defined(t, "cat", "input");
  int64_t nd = xs[0].ndim();
  int64_t ax = normalize_axis(axis, nd, "cat");
  Shape s = xs[0].shape();
  s[ax] = 0;
  std::vector<int64_t> sizes;
  for (const auto& t : xs) {
    MF_CHECK(t.ndim() == nd && t.dtype() == xs[0].dtype() && t.device() == xs[0].device(), "cat: ", t.str(),
             " does not match ", xs[0].str());
    for (int64_t d = 0; d < nd; ++d)
      MF_CHECK(d == ax || t.shape()[d] == xs[0].shape()[d], "cat: ", t.str(), " and ", xs[0].str(),
               " differ outside axis ", ax);
    sizes.push_back(t.shape()[ax]);
    s[ax] += t.shape()[ax];
  }
  Tensor out = empty(s, xs[0].dtype(), xs[0].device());
  {
    NoGradGuard ng;
    int64_t off = 0;
    for (const auto& t : xs) {
      Tensor slot = narrow(out, ax, off, t.shape()[ax]);
      copy_(slot, t);
      off += t.shape()[ax];
    }
  }
  record("cat", xs, {out}, [sizes, ax](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    std::vector<Tensor> r;
    int64_t off = 0;
    for (int64_t n : sizes) {
      r.push_back(narrow(g[0], ax, off, n));
      off += n;
    }
    return r;
  });
  return out;
}

namespace {

// The input-sized gradient as one view, when the pieces' gradients are already its consecutive
// slices in one dense buffer (attention's dq, dk and dv of an unbound qkv: see
// scaled_dot_product_attention); undefined otherwise, and then they are copied.
Tensor tiled_by(const std::vector<Tensor>& g, const Shape& in_shape, int64_t ax, const std::vector<int64_t>& sizes,
                bool drop_axis) {
  if (g.size() != sizes.size() || g.empty() || !g[0].defined()) return {};
  const Strides dense = contiguous_strides(in_shape);
  int64_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined() || g[i].impl()->storage != g[0].impl()->storage || g[i].dtype() != g[0].dtype()) return {};
    Shape s = in_shape;
    Strides st = dense;
    s[ax] = sizes[i];
    if (drop_axis) {
      s.erase(s.begin() + ax);
      st.erase(st.begin() + ax);
    }
    if (g[i].shape() != s || g[i].offset() != g[0].offset() + at * dense[ax]) return {};
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] != 1 && g[i].strides()[d] != st[d]) return {};
    at += sizes[i];
  }
  return make_view(g[0], in_shape, dense, g[0].offset());
}

// Consecutive pieces of axis `ax` of the given sizes, as views (the axis dropped when `drop_axis`,
// every size then 1), recorded as one node: its backward writes each piece's gradient into one
// input-sized buffer once, zeros for a piece that got none. (A node per piece would build a
// zero-filled input-sized gradient per piece and sum them.)
std::vector<Tensor> pieces(const Tensor& x, int64_t ax, const std::vector<int64_t>& sizes, bool drop_axis,
                           const char* op) {
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t n : sizes) {
    Shape s = x.shape();
    Strides st = x.strides();
    s[ax] = n;
    if (drop_axis) {
      s.erase(s.begin() + ax);
      st.erase(st.begin() + ax);
    }
    out.push_back(make_view(x, s, st, x.offset() + off * x.strides()[ax]));
    off += n;
  }
  Shape in_shape = x.shape();
  DType dt = x.dtype();
  Device dev = x.device();
  record(op, {x}, out, [in_shape, dt, dev, ax, sizes, drop_axis](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    if (Tensor whole = tiled_by(g, in_shape, ax, sizes, drop_axis); whole.defined()) return {whole};
    Tensor dx = empty(in_shape, dt, dev);
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor slot = narrow(dx, ax, at, sizes[i]);
      if (drop_axis) slot = squeeze(slot, ax);
      if (i < g.size() && g[i].defined())
        copy_(slot, g[i]);
      else
        fill_(slot, 0.0);
      at += sizes[i];
    }
    return {dx};
  });
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t axis) {
  detail::check_defined(x, "split", "x");
  MF_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  int64_t ax = normalize_axis(axis, x.ndim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t off = 0; off < x.shape()[ax]; off += split_size) sizes.push_back(std::min(split_size, x.shape()[ax] - off));
  return pieces(x, ax, sizes, false, "split");
}

std::vector<Tensor> unbind(const Tensor& x, int64_t axis) {
  detail::check_defined(x, "unbind", "x");
  int64_t ax = normalize_axis(axis, x.ndim(), "unbind");
  return pieces(x, ax, std::vector<int64_t>(static_cast<size_t>(x.shape()[ax]), 1), true, "unbind");
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) {
  detail::check_defined(x, "chunk", "x");
  MF_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  int64_t n = x.shape()[normalize_axis(axis, x.ndim(), "chunk")];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), axis);
}

}  // namespace mf
