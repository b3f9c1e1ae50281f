// rope: values against naive f64 loops (rotate-half layout, position offset), exact inverse
// through the gradient, finite-difference checks, and input errors.
#include <cmath>

#include "testing.h"

namespace {
using namespace mft;

std::vector<double> reference(const std::vector<double>& x, int64_t BH, int64_t T, int64_t D, double base,
                              int64_t offset) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < BH; ++r)
    for (int64_t t = 0; t < T; ++t) {
      const double* xr = x.data() + (r * T + t) * D;
      double* o = out.data() + (r * T + t) * D;
      for (int64_t i = 0; i < D / 2; ++i) {
        double th = static_cast<double>(t + offset) * std::pow(base, -2.0 * i / D);
        o[i] = xr[i] * std::cos(th) - xr[i + D / 2] * std::sin(th);
        o[i + D / 2] = xr[i + D / 2] * std::cos(th) + xr[i] * std::sin(th);
      }
    }
  return out;
}

TEST(Rope, MatchesReference) {
  Tensor x = randn({2, 3, 7, 8}, 1);
  expect_close(mf::rope(x), reference(to_f64(x), 6, 7, 8, 10000.0, 0), 1e-14, 1e-14, "f64");
  expect_close(mf::rope(x, 500.0, 11), reference(to_f64(x), 6, 7, 8, 500.0, 11), 1e-14, 1e-14, "offset");
  Tensor x32 = mf::cast(x, DType::kF32);
  expect_close(mf::rope(mf::transpose(mf::contiguous(mf::transpose(x32, 1, 2)), 1, 2), 10000.0, 3),
               reference(to_f64(x32), 6, 7, 8, 10000.0, 3), 1e-6, 1e-6, "f32 strided");
}

// Decoding a left-padded batch: row b rotated from its own first position (negative on padding).
TEST(Rope, PerRowOffsets) {
  Tensor x = randn({3, 2, 5, 8}, 4);
  const std::vector<double> f = mf::rope_inv_freq(8, 10000.0);
  const std::vector<int64_t> offsets = {0, -3, 17};
  const std::vector<double> all = to_f64(mf::rope(x, f, offsets));
  const std::vector<double> xs = to_f64(x);
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<double> row(xs.begin() + b * 80, xs.begin() + (b + 1) * 80);
    const std::vector<double> want = reference(row, 2, 5, 8, 10000.0, offsets[static_cast<size_t>(b)]);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(all[static_cast<size_t>(b * 80) + i], want[i], 1e-14) << b;
  }
  MFT_EXPECT_ERROR(mf::rope(x, f, std::vector<int64_t>{0, 1}), "rope", "2 row offsets");
}

// Given pair frequencies (Llama 3.1's scaled ones, say): pair i turns by (t + offset) * f[i];
// and gradient-checked.
TEST(Rope, GivenFrequencies) {
  Tensor x = randn({2, 2, 5, 6}, 3);
  const std::vector<double> f = {1.0, 0.3, 0.0125};
  std::vector<double> want = to_f64(x);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t t = 0; t < 5; ++t) {
      const std::vector<double> row(want.begin() + (r * 5 + t) * 6, want.begin() + (r * 5 + t + 1) * 6);
      for (int64_t i = 0; i < 3; ++i) {
        const double th = static_cast<double>(t + 2) * f[static_cast<size_t>(i)];
        want[(r * 5 + t) * 6 + i] = row[i] * std::cos(th) - row[i + 3] * std::sin(th);
        want[(r * 5 + t) * 6 + i + 3] = row[i + 3] * std::cos(th) + row[i] * std::sin(th);
      }
    }
  expect_close(mf::rope(x, f, 2), want, 1e-14, 1e-14, "frequencies");
  expect_close(mf::rope(x, mf::rope_inv_freq(6, 300.0), 1), to_f64(mf::rope(x, 300.0, 1)), 0.0, 0.0, "base");
  gradcheck([&](const std::vector<Tensor>& in) { return mf::rope(in[0], f, 1); }, {x}, 1e-6, 1e-7, 1e-5, "frequencies");
  MFT_EXPECT_ERROR(mf::rope(x, std::vector<double>{1.0, 2.0}), "rope", "2 pair frequencies");
}

TEST(Rope, BackwardIsInverseRotation) {
  Tensor x = randn({1, 2, 5, 4}, 2);
  x.set_requires_grad(true);
  Tensor y = mf::rope(x, 10000.0, 4);
  y.backward(mf::rope(randn({1, 2, 5, 4}, 3).detach(), 10000.0, 4).detach());
  expect_close(x.grad(), to_f64(randn({1, 2, 5, 4}, 3)), 1e-13, 1e-13, "R^T R = I");
}

TEST(Rope, Gradcheck) {
  gradcheck([](const std::vector<Tensor>& x) { return mf::rope(x[0], 100.0, 2); }, {randn({2, 2, 5, 6}, 4)}, 1e-6,
            1e-7, 1e-5, "rope");
  gradcheck([](const std::vector<Tensor>& x) { return mf::rope(x[0]); }, {non_contiguous(randn({2, 2, 3, 4}, 5))},
            1e-6, 1e-7, 1e-5, "rope non-contiguous");
}

TEST(Rope, BadInputs) {
  MFT_EXPECT_ERROR(mf::rope(randn({2, 2, 3, 5}, 1)), "rope", "even", "(2, 2, 3, 5)");
  MFT_EXPECT_ERROR(mf::rope(randn({2, 3, 4}, 1)), "rope", "(B, H, T, D)");
}

}  // namespace
