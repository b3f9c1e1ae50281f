// cross_entropy: loss and gradient against naive f64 loops (ignore_index, label smoothing,
// a GPT-2 sized vocabulary), finite-difference checks, and target errors.
#include <cmath>

#include "testing.h"

namespace {
using namespace mft;

// Mean loss over non-ignored rows and d(loss)/d(logits), in f64.
void reference(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t N, int64_t V, int64_t ignore,
               double eps, double* loss, std::vector<double>* grad) {
  int64_t n_valid = 0;
  for (int64_t i = 0; i < N; ++i) n_valid += t[i] != ignore;
  *loss = 0;
  grad->assign(N * V, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore) continue;
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, x[i * V + j]);
    for (int64_t j = 0; j < V; ++j) s += std::exp(x[i * V + j] - mx);
    double lse = mx + std::log(s);
    for (int64_t j = 0; j < V; ++j) {
      double target = (j == t[i] ? 1.0 - eps : 0.0) + eps / V;
      *loss -= target * (x[i * V + j] - lse) / n_valid;
      (*grad)[i * V + j] = (std::exp(x[i * V + j] - lse) - target) / n_valid;
    }
  }
}

void check(int64_t N, int64_t V, std::vector<int64_t> t, int64_t ignore, double eps, DType tdtype,
           const std::string& what) {
  Tensor x = mf::cast(randn({N, V}, 21), DType::kF32);
  x = mf::scale(x, 3.0).detach();
  x.set_requires_grad(true);
  Tensor tt = mf::cast(mf::from_vector(t, {N}), tdtype);
  Tensor loss = mf::cross_entropy(x, tt, ignore, eps);
  ASSERT_EQ(loss.ndim(), 0) << what;
  mf::scale(loss, 2.0).backward();
  double ref;
  std::vector<double> g;
  reference(to_f64(x), t, N, V, ignore, eps, &ref, &g);
  for (double& v : g) v *= 2.0;
  expect_close(loss, {ref}, 1e-5, 1e-6, what + " loss");
  expect_close(x.grad(), g, 1e-5, 1e-7, what + " grad");
}

TEST(CrossEntropy, MatchesReference) {
  check(6, 11, {3, 0, 10, 5, 5, 1}, -100, 0.0, DType::kI64, "plain");
  check(6, 11, {3, -100, 10, 5, -100, 1}, -100, 0.1, DType::kI32, "ignore + smoothing");
  check(4, 7, {2, 6, 2, 0}, 2, 0.0, DType::kI64, "ignore_index 2");
}

TEST(CrossEntropy, LargeVocabulary) { check(3, 50257, {50256, 0, 12345}, -100, 0.1, DType::kI64, "V=50257"); }

TEST(CrossEntropy, AllIgnoredGivesZeroLossAndGradient) {
  Tensor x = randn({3, 5}, 1);
  x.set_requires_grad(true);
  Tensor loss = mf::cross_entropy(x, mf::from_vector<int64_t>({-1, -1, -1}, {3}), -1);
  EXPECT_EQ(loss.item(), 0.0);
  loss.backward();
  for (double v : to_f64(x.grad())) EXPECT_EQ(v, 0.0);
}

TEST(CrossEntropy, Gradcheck) {
  Tensor t = mf::from_vector<int64_t>({1, -100, 4, 0, 4}, {5});
  for (double eps : {0.0, 0.2})
    gradcheck([&](const std::vector<Tensor>& x) { return mf::cross_entropy(x[0], t, -100, eps); },
              {randn({5, 6}, 3)}, 1e-6, 1e-7, 1e-5, "cross_entropy");
  gradcheck([&](const std::vector<Tensor>& x) { return mf::cross_entropy(x[0], t, -100, 0.1); },
            {non_contiguous(randn({5, 6}, 4))}, 1e-6, 1e-7, 1e-5, "cross_entropy non-contiguous");
}

TEST(CrossEntropy, BadTargets) {
  Tensor x = randn({4, 5}, 1);
  MFT_EXPECT_ERROR(mf::cross_entropy(x, mf::from_vector<int64_t>({0, 1, 5, 2}, {4})), "cross_entropy", "value 5",
                   "position 2", "[0, 5)");
  MFT_EXPECT_ERROR(mf::cross_entropy(x, mf::from_vector<int32_t>({0, -3, 1, 2}, {4})), "cross_entropy", "value -3",
                   "position 1");
  MFT_EXPECT_ERROR(mf::cross_entropy(x, mf::from_vector<double>({0, 1, 1, 2}, {4})), "cross_entropy", "targets",
                   "i32 or i64");
  MFT_EXPECT_ERROR(mf::cross_entropy(x, mf::from_vector<int64_t>({0, 1, 1}, {3})), "cross_entropy", "(3,)", "(4, 5)");
}

}  // namespace
