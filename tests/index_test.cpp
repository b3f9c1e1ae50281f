// embedding / index_select / gather / where: values, row-accumulated gradients, range errors.
#include "testing.h"

namespace {
using namespace mft;

TEST(Index, EmbeddingAccumulatesRepeatedRows) {
  Tensor w = randn({5, 3}, 1);
  w.set_requires_grad(true);
  Tensor ids = mf::from_vector<int64_t>({4, 1, 4, 0, 4, 2}, {2, 3});
  Tensor out = mf::embedding(w, ids);
  ASSERT_EQ(out.shape(), (mf::Shape{2, 3, 3}));
  std::vector<double> wv = to_f64(w), ref;
  std::vector<int64_t> iv = ids.to_vector<int64_t>();
  for (int64_t id : iv)
    for (int c = 0; c < 3; ++c) ref.push_back(wv[id * 3 + c]);
  expect_close(out, ref, 0, 0, "embedding");
  Tensor g = randn({2, 3, 3}, 2);
  out.backward(g);
  std::vector<double> gv = to_f64(g), dref(15, 0.0);
  for (size_t t = 0; t < iv.size(); ++t)
    for (int c = 0; c < 3; ++c) dref[iv[t] * 3 + c] += gv[t * 3 + c];
  expect_close(w.grad(), dref, 1e-15, 1e-15, "embedding grad");
  gradcheck([ids](const std::vector<Tensor>& in) { return mf::embedding(in[0], ids); }, {randn({5, 3}, 3)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::embedding(in[0], mf::from_vector<int32_t>({1, 1, 0}, {3})); },
            {non_contiguous(randn({2, 4}, 4))});
}

TEST(Index, IndexSelectGatherGradients) {
  Tensor idx = mf::from_vector<int64_t>({2, 0, 2}, {3});
  gradcheck([idx](const std::vector<Tensor>& in) { return mf::index_select(in[0], 1, idx); }, {randn({2, 3, 2}, 5)});
  Tensor gidx = mf::from_vector<int64_t>({0, 2, 2, 1, 1, 1}, {2, 3});
  Tensor x = randn({2, 4}, 6);
  std::vector<double> xv = to_f64(x), ref;
  std::vector<int64_t> gv = gidx.to_vector<int64_t>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) ref.push_back(xv[i * 4 + gv[i * 3 + j]]);
  expect_close(mf::gather(x, 1, gidx), ref, 0, 0, "gather");
  gradcheck([gidx](const std::vector<Tensor>& in) { return mf::gather(in[0], 1, gidx); }, {non_contiguous(randn({2, 4}, 7))});
}

TEST(Index, WhereAndMaskedFill) {
  Tensor cond = mf::from_vector<bool>({true, false, true}, {3});
  Tensor a = randn({2, 3}, 1), b = randn({3}, 2);
  std::vector<double> av = to_f64(a), bv = to_f64(b), ref;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) ref.push_back(j != 1 ? av[i * 3 + j] : bv[j]);
  expect_close(mf::where(cond, a, b), ref, 0, 0, "where");
  gradcheck([cond](const std::vector<Tensor>& in) { return mf::where(cond, in[0], in[1]); }, {a, b});
  Tensor mf_out = mf::masked_fill(a, cond, -5.0);
  std::vector<double> mv = to_f64(mf_out);
  EXPECT_EQ(mv[0], -5.0);
  EXPECT_EQ(mv[1], av[1]);
  gradcheck([cond](const std::vector<Tensor>& in) { return mf::masked_fill(in[0], cond, 3.0); }, {randn({2, 3}, 3)});
}

TEST(Index, OutOfRangeIndicesThrow) {
  Tensor w = randn({5, 3}, 1);
  MFT_EXPECT_ERROR(mf::embedding(w, mf::from_vector<int64_t>({0, 5}, {2})), "embedding", "5", "out of range [0, 5)");
  MFT_EXPECT_ERROR(mf::embedding(w, mf::from_vector<int64_t>({-1}, {1})), "out of range");
  MFT_EXPECT_ERROR(mf::embedding(w, randn({2}, 1)), "embedding", "must be i32 or i64");
  MFT_EXPECT_ERROR(mf::gather(w, 1, mf::from_vector<int64_t>({0, 1, 3, 0, 0}, {5, 1})), "gather", "out of range");
  MFT_EXPECT_ERROR(mf::where(mf::from_vector<float>({1}, {1}), w, w), "where", "must be bool");
}

}  // namespace
