// matmul / linear against naive f64 loops, incl. batched broadcast and transposed views.
#include "testing.h"

namespace {
using namespace mft;

// Naive (B, M, K) @ (B, K, N) over logical values.
std::vector<double> naive_bmm(const std::vector<double>& a, const std::vector<double>& b, int B, int M, int K, int N,
                              bool b_shared) {
  std::vector<double> c(static_cast<size_t>(B * M * N), 0.0);
  for (int z = 0; z < B; ++z)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int k = 0; k < K; ++k) s += a[(z * M + i) * K + k] * b[((b_shared ? 0 : z) * K + k) * N + j];
        c[(z * M + i) * N + j] = s;
      }
  return c;
}

TEST(Matmul, ValuesIncludingTransposedViews) {
  Tensor a = randn({3, 4, 5}, 1), b = randn({3, 5, 2}, 2), w = randn({5, 2}, 3);
  expect_close(mf::matmul(a, b), naive_bmm(to_f64(a), to_f64(b), 3, 4, 5, 2, false), 1e-13, 1e-13, "bmm");
  expect_close(mf::matmul(a, w), naive_bmm(to_f64(a), to_f64(w), 3, 4, 5, 2, true), 1e-13, 1e-13, "broadcast b");
  Tensor at = mf::transpose(mf::contiguous(mf::transpose(a, 1, 2)), 1, 2);  // column-major storage
  ASSERT_FALSE(at.is_contiguous());
  expect_close(mf::matmul(at, b), naive_bmm(to_f64(a), to_f64(b), 3, 4, 5, 2, false), 1e-13, 1e-13, "transposed a");
  Tensor af = mf::cast(a, DType::kF32), bf = mf::cast(b, DType::kF32);
  expect_rel_close(mf::matmul(af, bf), naive_bmm(to_f64(af), to_f64(bf), 3, 4, 5, 2, false), 1e-5, "f32 bmm");
  MFT_EXPECT_ERROR(mf::matmul(a, a), "matmul", "inner dimensions");
  MFT_EXPECT_ERROR(mf::matmul(af, b), "matmul", "dtype mismatch");
}

TEST(Matmul, LinearMatchesNaive) {
  int M = 6, K = 5, N = 7;
  Tensor x = randn({2, 3, K}, 1), w = randn({N, K}, 2), bias = randn({N}, 3);
  std::vector<double> xv = to_f64(x), wv = to_f64(w), bv = to_f64(bias), ref(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = bv[j];
      for (int k = 0; k < K; ++k) s += xv[i * K + k] * wv[j * K + k];
      ref[i * N + j] = s;
    }
  Tensor y = mf::linear(x, w, bias);
  EXPECT_EQ(y.shape(), (mf::Shape{2, 3, N}));
  expect_close(y, ref, 1e-13, 1e-13, "linear");
  expect_rel_close(mf::linear(mf::cast(x, DType::kF32), mf::cast(w, DType::kF32), mf::cast(bias, DType::kF32)), ref, 1e-5,
                   "linear f32");
  MFT_EXPECT_ERROR(mf::linear(x, randn({N, K + 1}, 4)), "linear", "does not match weight");
  // affine: the same product with the weight stored (in, out)
  Tensor wt = mf::contiguous(mf::transpose(w, 0, 1));
  expect_close(mf::affine(x, wt, bias), ref, 1e-13, 1e-13, "affine");
  MFT_EXPECT_ERROR(mf::linear(x, w, randn({N + 1}, 4)), "linear", "bias");
}

TEST(Matmul, LongInnerDimensionsTransposedWeightsMatchNaive) {
  // x·Wᵀ with K >= 2048 takes oneDNN's matmul primitive on the CPU (ops/cpu/gemm.cpp): with and
  // without the bias accumulated into the output, and with rows wider than K (a narrowed view).
  const int M = 9, K = 2100, N = 5;
  Tensor wide = mf::cast(randn({M, K + 3}, 1), DType::kF32), w = mf::cast(randn({N, K}, 2), DType::kF32);
  Tensor bias = mf::cast(randn({N}, 3), DType::kF32);
  Tensor x = mf::narrow(wide, 1, 1, K);
  ASSERT_FALSE(x.is_contiguous());
  std::vector<double> xv = to_f64(mf::contiguous(x)), wv = to_f64(w), bv = to_f64(bias), ref(M * N), ref_bias(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += xv[i * K + k] * wv[j * K + k];
      ref[i * N + j] = s;
      ref_bias[i * N + j] = s + bv[j];
    }
  expect_rel_close(mf::linear(x, w), ref, 1e-5, "x W^T");
  expect_rel_close(mf::linear(x, w, bias), ref_bias, 1e-5, "x W^T + bias");
  expect_rel_close(mf::matmul(x, mf::transpose(w, 0, 1)), ref, 1e-5, "matmul with a transposed view");
}

TEST(Matmul, VocabularyWideShapesMatchNaive) {
  // The CPU's GEMM picks the form by shape (ops/cpu/gemm.cpp): x·Wᵀ with a vocabulary-wide output
  // takes oneDNN's matmul primitive from K = 512 on and sgemm below; x·W with a vocabulary-long
  // inner dimension and a narrow output takes the primitive, a wider one sgemm. Every path, with
  // and without accumulation into the output (beta = 1, the weight gradient's), against loops.
  auto naive = [](const Tensor& a, const Tensor& b) {  // a (M, K) · b (K, N), f64 sums
    const int64_t M = a.shape(0), K = a.shape(1), N = b.shape(1);
    const std::vector<double> av = to_f64(mf::contiguous(a)), bv = to_f64(mf::contiguous(b));
    std::vector<double> r(static_cast<size_t>(M * N), 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) r[i * N + j] += av[i * K + k] * bv[k * N + j];
    return r;
  };
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{600, 16400}, {100, 16400}}) {
    Tensor x = mf::cast(randn({3, K}, 1), DType::kF32), w = mf::cast(randn({N, K}, 2), DType::kF32);
    expect_rel_close(mf::linear(x, w), naive(x, mf::transpose(w, 0, 1)), 1e-5, "x W^T, K " + std::to_string(K));
  }
  for (const int64_t N : {64, 300}) {
    const int64_t K = 16400;
    Tensor x = mf::cast(randn({3, K}, 3), DType::kF32), w = mf::cast(randn({K, N}, 4), DType::kF32);
    expect_rel_close(mf::matmul(x, w), naive(x, w), 1e-5, "x W, N " + std::to_string(N));
    // The gradient of a (K, N) weight used twice: the second GEMM adds into the first's .grad.
    Tensor wl = mf::clone(w);
    wl.set_requires_grad(true);
    Tensor g = mf::cast(randn({3, N}, 5), DType::kF32);
    mf::add(mf::sum(mf::mul(mf::affine(x, wl), g)), mf::sum(mf::mul(mf::affine(x, wl), g))).backward();
    std::vector<double> want = naive(mf::transpose(x, 0, 1), g);  // (K, N)
    for (double& v : want) v *= 2;
    expect_rel_close(wl.grad(), want, 1e-5, "dW += x^T g, N " + std::to_string(N));
  }
}

TEST(Matmul, Gradients) {
  gradcheck([](const std::vector<Tensor>& in) { return mf::matmul(in[0], in[1]); }, {randn({2, 3, 4}, 1), randn({4, 5}, 2)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::matmul(in[0], in[1]); },
            {non_contiguous(randn({3, 4}, 3)), randn({2, 1, 4, 2}, 4)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::matmul(in[0], in[1]); }, {randn({4}, 5), randn({4, 3}, 6)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::linear(in[0], in[1], in[2]); },
            {randn({2, 3, 4}, 7), randn({5, 4}, 8), randn({5}, 9)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::linear(in[0], in[1]); },
            {non_contiguous(randn({3, 4}, 10)), non_contiguous(randn({5, 4}, 11))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::affine(in[0], in[1], in[2]); },
            {randn({2, 3, 4}, 12), non_contiguous(randn({4, 5}, 13)), randn({5}, 14)});
}

}  // namespace
