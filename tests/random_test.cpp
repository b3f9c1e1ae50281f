// Philox against its published known-answer vectors; dropout and init keyed by logical offset.
#include "meshflow/random/philox.h"
#include "testing.h"

namespace {
using namespace mft;

TEST(Philox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32_10.
  mf::Philox4x32 r = mf::philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = mf::philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = mf::philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(Philox, BlocksDrawnTogetherAreTheBlocksDrawnOneByOne) {
  // philox_blocks (vectorised; AVX-512 intrinsics where the CPU has them) against philox_block,
  // where the low counter word wraps into the high one too, and for a block count that is not
  // the vector width's multiple.
  for (uint64_t first : {uint64_t{0}, uint64_t{5}, uint64_t{0xFFFFFFF8u}, uint64_t{0xFFFFFFFFu},
                         uint64_t{0x1234FFFFFFF0}, ~uint64_t{0} - 3}) {
    alignas(64) uint32_t words[4 * 32];
    mf::philox_blocks<32>(0x123456789abcdefULL, 0xfedcba987654321ULL, first, words);
    for (int j = 0; j < 32; ++j) {
      const mf::Philox4x32 r = mf::philox_block(0x123456789abcdefULL, 0xfedcba987654321ULL, first + static_cast<uint64_t>(j));
      for (int w = 0; w < 4; ++w) ASSERT_EQ(words[4 * j + w], r.v[w]) << "block " << first << " + " << j << " word " << w;
    }
    uint32_t odd[4 * 3];
    mf::philox_blocks<3>(7, 9, first, odd);
    for (int j = 0; j < 3; ++j)
      for (int w = 0; w < 4; ++w) ASSERT_EQ(odd[4 * j + w], mf::philox_block(7, 9, first + static_cast<uint64_t>(j)).v[w]);
  }
}

TEST(Random, NormalAndUniformMoments) {
  Tensor n = randn({200000}, 3);
  std::vector<double> v = to_f64(n);
  double m = 0, s2 = 0;
  for (double e : v) m += e / v.size();
  for (double e : v) s2 += (e - m) * (e - m) / v.size();
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(s2), 1.0, 0.01);
  Tensor u = rand_uniform({100000}, -2.0, 2.0, 4);
  std::vector<double> uv = to_f64(u);
  for (double e : uv) ASSERT_TRUE(e >= -2.0 && e < 2.0);
}

// The piece of a split tensor draws exactly the numbers of the same positions of the whole.
TEST(Random, PiecesDrawWhatTheWholeDraws) {
  mf::Generator g1(11), g2(11);
  Tensor whole = mf::empty({6, 8}, DType::kF32);
  mf::normal_(whole, 0.0, 1.0, &g1);
  Tensor cols = mf::empty({6, 3}, DType::kF32);  // columns 4..6 of the whole
  mf::normal_(cols, 0.0, 1.0, &g2, {{6, 8}, {0, 4}});
  expect_close(cols, to_f64(mf::narrow(whole, 1, 4, 3)), 0, 0, "column piece of normal_");

  Tensor x = randn({4, 5, 6}, 5, DType::kF32);
  mf::Generator d1(9), d2(9), d3(9);
  Tensor full = mf::dropout(x, 0.3, true, &d1);
  Tensor piece = mf::narrow(x, 1, 2, 2);
  Tensor dp = mf::dropout(mf::contiguous(piece), 0.3, true, &d2, {{4, 5, 6}, {0, 2, 0}});
  expect_close(dp, to_f64(mf::narrow(full, 1, 2, 2)), 0, 0, "dropout piece, axis 1");
  Tensor rows = mf::contiguous(mf::narrow(x, 0, 1, 2));
  expect_close(mf::dropout(rows, 0.3, true, &d3, {{4, 5, 6}, {1, 0, 0}}), to_f64(mf::narrow(full, 0, 1, 2)), 0, 0,
               "dropout piece, axis 0");
}

TEST(Dropout, MaskRateScaleAndGradient) {
  Tensor x = mf::ones({100000}, DType::kF32);
  x.set_requires_grad(true);
  mf::Generator g(1);
  Tensor y = mf::dropout(x, 0.25, true, &g);
  std::vector<float> yv = y.to_vector<float>();
  int kept = 0;
  for (float v : yv) {
    ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6f);
    kept += v != 0.0f;
  }
  EXPECT_NEAR(kept / 100000.0, 0.75, 0.01);
  mf::sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), yv);  // same mask in backward, regenerated
  EXPECT_EQ(mf::dropout(x, 0.25, false).impl(), x.impl());  // eval: identity
  mf::Generator g2(1);
  EXPECT_EQ(mf::dropout(x, 0.25, true, &g2).to_vector<float>(), yv);  // same state, same mask
  MFT_EXPECT_ERROR(mf::dropout(x, 1.0), "dropout", "[0, 1)");
  gradcheck(
      [](const std::vector<Tensor>& in) {
        mf::Generator gen(3);
        return mf::dropout(in[0], 0.5, true, &gen);
      },
      {non_contiguous(randn({4, 5}, 6))});
}

}  // namespace
