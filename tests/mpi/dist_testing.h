// Helpers shared by the multi-rank tests of the global view: logical tensors from a formula of
// the flat index (the same on every rank), a rank's piece of one, and element-wise comparison.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/global/sbp.h"
#include "testing.h"

namespace mft {

inline Tensor formula(const Shape& shape, double a, double b, int mod, DType dtype = DType::kF64) {
  const int64_t n = mf::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = a + b * static_cast<double>((i * 7) % mod) + 0.001 * i;
  Tensor t = mf::from_vector(v, shape);
  return dtype == DType::kF64 ? t : mf::cast(t, dtype);
}

// The piece of the logical `t` that `sbp` gives the rank at `coord` (P axes: the whole).
inline Tensor piece(const Tensor& t, const mf::global::NdSbp& sbp, const std::vector<int64_t>& mesh,
                    const std::vector<int64_t>& coord) {
  mf::LogicalSlice s = mf::global::local_slice(t.shape(), sbp, mesh, coord);
  Shape sh = mf::global::local_shape(t.shape(), sbp, mesh, coord);
  Tensor r = t;
  for (size_t k = 0; k < sh.size(); ++k) r = mf::narrow(r, static_cast<int64_t>(k), s.start[k], sh[k]);
  return mf::contiguous(r);
}

// This rank's mesh coordinate: its rank in each mesh axis's communicator.
inline std::vector<int64_t> coord_of(const std::vector<mf::comm::Communicator*>& comms) {
  std::vector<int64_t> c;
  for (mf::comm::Communicator* x : comms) c.push_back(x->rank());
  return c;
}

// |got - want| <= tol (1 + |want|) element-wise (NaN fails); reports at most 3 elements and
// returns how many it reported (1 for a shape mismatch).
inline int expect_tensor_close(const Tensor& got, const Tensor& want, const std::string& what, double tol = 1e-12) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return 1;
  std::vector<double> g = to_f64(got), w = to_f64(want);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 3; ++i)
    if (!(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
      ++bad;
    }
  return bad;
}

}  // namespace mft
