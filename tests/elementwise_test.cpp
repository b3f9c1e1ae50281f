// Elementwise ops and activations: values against naive f64 loops, gradients by finite
// differences on broadcast and non-contiguous inputs.
#include <cmath>

#include "testing.h"

namespace {
using namespace mft;

TEST(Elementwise, BroadcastValues) {
  Tensor a = randn({2, 3, 4}, 1), b = randn({3, 1}, 2);
  std::vector<double> av = to_f64(a), bv = to_f64(b), ref(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) ref[(i * 3 + j) * 4 + k] = av[(i * 3 + j) * 4 + k] * bv[j];
  expect_close(mf::mul(a, b), ref, 1e-15, 0, "mul");
  expect_close(mf::mul(non_contiguous(a), b), ref, 1e-15, 0, "mul non-contiguous");
  for (int i = 0; i < 24; ++i) ref[i] = av[i] / bv[(i / 4) % 3];
  expect_close(mf::div(a, b), ref, 1e-15, 0, "div");
}

TEST(Elementwise, GradBinaryBroadcastNonContiguous) {
  for (auto op : {mf::add, mf::sub, mf::mul, mf::div}) {
    Tensor a = randn({3, 4, 5}, 3), b = mf::add_scalar(rand_uniform({4, 1}, 0.0, 1.0, 4), 1.0);
    gradcheck([op](const std::vector<Tensor>& x) { return op(x[0], x[1]); }, {a, b}, 1e-6, 1e-7, 1e-5, "binary");
    gradcheck([op](const std::vector<Tensor>& x) { return op(x[0], x[1]); }, {non_contiguous(randn({2, 4, 5}, 5)), b},
              1e-6, 1e-7, 1e-5, "binary non-contiguous");
  }
}

}  // namespace
