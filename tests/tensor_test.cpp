// Tensor, dtype, views and allocator accounting.
#include <algorithm>
#include <cmath>
#include <random>

#include "meshflow/tensor/allocator.h"
#include "testing.h"

namespace {
using namespace mft;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(mf::dtype_nbytes(DType::kBF16), 2u);
  EXPECT_EQ(mf::dtype_nbytes(DType::kI64), 8u);
  EXPECT_EQ(mf::dtype_from_name("f16"), DType::kF16);
  MFT_EXPECT_ERROR(mf::dtype_from_name("f8"), "unknown dtype", "f8");
}

// Nearest value of a sorted list of representable numbers, ties to the even encoding.
template <class H>
uint16_t nearest_encoding(double v, const std::vector<std::pair<double, uint16_t>>& table) {
  auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(v, uint16_t{0}),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it == table.begin()) return it->second;
  if (it == table.end()) return (it - 1)->second;
  auto lo = it - 1;
  double dl = v - lo->first, dh = it->first - v;
  if (dl < dh) return lo->second;
  if (dh < dl) return it->second;
  return (lo->second & 1) == 0 ? lo->second : it->second;
}

template <class H>
void check_rounding(int exp_lo, int exp_hi) {
  std::vector<std::pair<double, uint16_t>> table;
  for (uint32_t b = 0; b < 65536; ++b) {
    H h;
    h.bits = static_cast<uint16_t>(b);
    float f = static_cast<float>(h);
    if (std::isfinite(f) && !(f == 0 && std::signbit(f))) table.push_back({f, h.bits});
    if (std::isfinite(f)) {  // every finite encoding round-trips
      ASSERT_EQ(H(f).bits, h.bits) << "bits " << b;
    }
  }
  std::sort(table.begin(), table.end());
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(exp_lo, exp_hi);
  for (int i = 0; i < 200000; ++i) {
    float f = static_cast<float>(std::ldexp(mant(rng), ex(rng)));
    uint16_t want = nearest_encoding<H>(f, table);
    uint16_t got = H(f).bits;
    if (f == 0) continue;
    H wh;
    wh.bits = want;
    if (static_cast<float>(wh) == 0) continue;  // sign of zero is not this test's concern
    ASSERT_EQ(got, want) << "value " << f;
  }
}

TEST(DType, BFloat16RoundsToNearestEven) { check_rounding<mf::BFloat16>(-130, 127); }
TEST(DType, Float16RoundsToNearestEven) { check_rounding<mf::Float16>(-26, 15); }

TEST(DType, CastBetweenTypes) {
  Tensor x = mf::from_vector<float>({1.5f, -2.25f, 3.0f, 0.0f}, {4});
  EXPECT_EQ(mf::cast(mf::cast(x, DType::kBF16), DType::kF32).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(mf::cast(mf::cast(x, DType::kF16), DType::kF32).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(mf::cast(x, DType::kI64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 0}));
  EXPECT_EQ(mf::cast(x, DType::kBool).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  gradcheck([](const std::vector<Tensor>& in) { return mf::cast(mf::cast(in[0], DType::kF32), DType::kF64); },
            {randn({3, 4}, 9)}, 1e-3, 1e-6, 1e-4, "cast f64->f32->f64");
}

TEST(Tensor, ViewsShareStorage) {
  Tensor x = randn({2, 3, 4}, 1);
  EXPECT_EQ(mf::reshape(x, {6, 4}).impl()->storage, x.impl()->storage);
  Tensor p = mf::permute(x, {2, 0, 1});
  EXPECT_EQ(p.impl()->storage, x.impl()->storage);
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.shape(), (mf::Shape{4, 2, 3}));
  Tensor n = mf::narrow(x, 1, 1, 2);
  EXPECT_EQ(n.impl()->storage, x.impl()->storage);
  EXPECT_EQ(n.offset(), 4);
  Tensor c = mf::contiguous(p);
  EXPECT_NE(c.impl()->storage, x.impl()->storage);
  std::vector<double> xv = to_f64(x), cv = to_f64(c);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(cv[(k * 2 + i) * 3 + j], xv[(i * 3 + j) * 4 + k]);
  MFT_EXPECT_ERROR(mf::view(p, {8, 3}), "view", "without a copy");
  Tensor r = mf::reshape(p, {8, 3});  // copies
  EXPECT_NE(r.impl()->storage, x.impl()->storage);
  EXPECT_EQ(to_f64(r), cv);
}

TEST(Tensor, AllocatorCountsCurrentAndPeak) {
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  a.reset_peak();
  auto before = a.stats();
  {
    Tensor t = mf::empty({1000}, DType::kF32);
    EXPECT_EQ(a.stats().current_bytes, before.current_bytes + 4000);
    {
      Tensor u = mf::empty({250}, DType::kF64);
      EXPECT_EQ(a.stats().peak_bytes, before.current_bytes + 6000);
    }
    EXPECT_EQ(a.stats().current_bytes, before.current_bytes + 4000);
    Tensor v = mf::reshape(t, {10, 100});  // a view allocates nothing
    EXPECT_EQ(a.stats().current_bytes, before.current_bytes + 4000);
  }
  EXPECT_EQ(a.stats().current_bytes, before.current_bytes);
  EXPECT_EQ(a.stats().peak_bytes, before.current_bytes + 6000);
}

TEST(Tensor, BadInputThrows) {
  MFT_EXPECT_ERROR(mf::from_vector<float>({1, 2, 3}, {2, 2}), "from_vector", "3 values");
  Tensor x = mf::zeros({4});
  MFT_EXPECT_ERROR(mf::make_view(x, {5}, {1}, 0), "make_view", "exceeds storage");
  MFT_EXPECT_ERROR(x.data<double>(), "data<f64>", "f32");
  // Sizes past int64 / size_t: once a wrapped byte count and a write past the allocation
  // (model.max_seq_length=9223372036854775807 ended `meshflow train` in a segfault).
  MFT_EXPECT_ERROR(mf::zeros({int64_t{1} << 62, 2}), "shape (4611686018427387904, 2) has more elements than int64");
  MFT_EXPECT_ERROR(mf::zeros({int64_t{1} << 62}), "needs more bytes than size_t counts");
  EXPECT_EQ(mf::zeros({int64_t{1} << 62, 4, 0}).numel(), 0);  // no elements: no product to overflow
}

}  // namespace
