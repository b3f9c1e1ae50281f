// Reductions and shape ops: values against naive loops, gradients by finite differences.
#include "testing.h"

namespace {
using namespace mft;

TEST(Reduce, SumMeanMaxValues) {
  Tensor x = randn({3, 4, 5}, 1);
  std::vector<double> v = to_f64(x);
  std::vector<double> s1(15, 0), m02(4, 0), mx(12, -1e300);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) {
        double e = v[(i * 4 + j) * 5 + k];
        s1[i * 5 + k] += e;
        m02[j] += e / 15.0;
        mx[i * 4 + j] = std::max(mx[i * 4 + j], e);
      }
  expect_close(mf::sum(x, {1}), s1, 1e-14, 1e-14, "sum axis 1");
  expect_close(mf::sum(non_contiguous(x), {1}), s1, 1e-14, 1e-14, "sum axis 1 non-contiguous");
  expect_close(mf::mean(x, {0, 2}), m02, 1e-14, 1e-14, "mean axes 0,2");
  expect_close(mf::max(x, -1), mx, 0, 0, "max");
  EXPECT_EQ(mf::sum(x, {1}, true).shape(), (mf::Shape{3, 1, 5}));
  EXPECT_EQ(mf::sum(x).shape(), (mf::Shape{}));
  MFT_EXPECT_ERROR(mf::sum(x, {3}), "sum", "axis 3 out of range");
}

TEST(Reduce, Gradients) {
  gradcheck([](const std::vector<Tensor>& in) { return mf::sum(in[0], {0, 2}); }, {randn({3, 4, 5}, 2)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::mean(in[0], {1}, true); }, {non_contiguous(randn({3, 4}, 3))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::max(in[0], 1); }, {randn({3, 6, 2}, 4)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::sum_to(in[0], {1, 4}); }, {randn({2, 3, 4}, 5)});
}

TEST(Shape, CatSplitChunkNarrowValues) {
  Tensor a = randn({2, 3}, 1), b = randn({2, 2}, 2);
  Tensor c = mf::cat({a, b}, 1);
  std::vector<double> av = to_f64(a), bv = to_f64(b), ref;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) ref.push_back(av[i * 3 + j]);
    for (int j = 0; j < 2; ++j) ref.push_back(bv[i * 2 + j]);
  }
  expect_close(c, ref, 0, 0, "cat");
  auto parts = mf::split(c, 2, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (mf::Shape{2, 1}));
  auto ch = mf::chunk(c, 2, 1);
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].shape(), (mf::Shape{2, 3}));
  expect_close(ch[0], av, 0, 0, "chunk 0");
  auto rows = mf::unbind(c, 0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].shape(), (mf::Shape{5}));
  expect_close(rows[1], std::vector<double>(ref.begin() + 5, ref.end()), 0, 0, "unbind 1");
  MFT_EXPECT_ERROR(mf::unbind(c, 2), "unbind", "out of range");
  MFT_EXPECT_ERROR(mf::cat({a, randn({3, 2}, 3)}, 1), "cat", "differ outside axis 1");
  MFT_EXPECT_ERROR(mf::narrow(a, 1, 2, 2), "narrow", "out of range");
  MFT_EXPECT_ERROR(mf::reshape(a, {4, 2}), "reshape", "has 8 elements");
}

TEST(Shape, Gradients) {
  gradcheck([](const std::vector<Tensor>& in) { return mf::cat({in[0], in[1], in[0]}, 1); },
            {randn({2, 3}, 1), non_contiguous(randn({2, 2}, 2))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::narrow(in[0], 1, 1, 2); }, {randn({3, 4, 2}, 3)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::permute(in[0], {2, 0, 1}); }, {randn({3, 4, 2}, 4)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::reshape(in[0], {4, -1}); }, {non_contiguous(randn({3, 4}, 5))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::expand(in[0], {3, 2, 4}); }, {randn({2, 1}, 6)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::mul(mf::split(in[0], 2, 0)[1], mf::chunk(in[0], 2, 0)[0]); },
            {randn({4, 3}, 7)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::unsqueeze(mf::squeeze(in[0], 1), 0); }, {randn({3, 1, 2}, 8)});
  // Pieces used twice, once or not at all (their slots' gradient is zero), of a strided input.
  gradcheck([](const std::vector<Tensor>& in) {
    auto p = mf::unbind(in[0], 1);
    return mf::add(mf::mul(p[0], p[2]), mf::scale(p[0], 3.0));
  }, {non_contiguous(randn({4, 3}, 9))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::exp(mf::split(in[0], 2, 1)[2]); }, {randn({2, 5, 3}, 10)});
}

// split/chunk/unbind are one autograd node: the input's gradient is written once, not summed
// from a zero-filled input-sized gradient per piece.
TEST(Shape, PiecesShareOneBackwardNode) {
  Tensor x = randn({3, 4}, 11);
  x.set_requires_grad(true);
  auto p = mf::unbind(x, 1);
  EXPECT_EQ(p[0].grad_fn(), p[3].grad_fn());
  auto q = mf::split(x, 3, 1);
  EXPECT_EQ(q[0].grad_fn(), q[1].grad_fn());
}

}  // namespace
