#include "meshflow/core/shape.h"

#include "meshflow/core/error.h"

namespace mf {

int64_t shape_numel(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;  // before any product: (huge, huge, 0) holds nothing
  int64_t n = 1;
  for (int64_t d : s)
    MF_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", shape_str(s), " has more elements than int64 counts (2^63)");
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  if (s.size() == 1) r += ",";
  return r + ")";
}

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* op) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  MF_CHECK(a >= 0 && a < ndim, op, ": axis ", axis, " out of range for a tensor of rank ", ndim);
  return a;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MF_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
             " do not broadcast (axis ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace mf
