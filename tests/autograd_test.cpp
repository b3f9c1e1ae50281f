// The autograd engine: accumulation, shared inputs, no-grad, freed graphs, grad-ready hooks.
#include "meshflow/autograd/engine.h"
#include "meshflow/tensor/allocator.h"
#include "testing.h"

namespace {
using namespace mft;

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor x = mf::from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  for (int i = 0; i < 2; ++i) mf::sum(mf::mul(x, x)).backward();
  EXPECT_EQ(to_f64(x.grad()), (std::vector<double>{4, 8, 12}));
}

TEST(Autograd, SharedInputSumsGradients) {
  Tensor x = mf::from_vector<double>({1, -2}, {2});
  x.set_requires_grad(true);
  Tensor y = mf::add(mf::mul(x, x), mf::scale(x, 3.0));  // 2x + 3
  mf::sum(y).backward();
  EXPECT_EQ(to_f64(x.grad()), (std::vector<double>{5, -1}));
}

// A leaf used by four products gets each gradient added into .grad as it arrives: backward
// holds one incoming (256, 256) gradient beside .grad, never a running sum as well; the
// grad-ready hook fires once, after the last.
TEST(Autograd, LeafUsedManyTimesHoldsOneIncomingGradient) {
  Tensor w = randn({256, 256}, 1, DType::kF32);
  w.set_requires_grad(true);
  w.set_grad(mf::zeros({256, 256}));
  int fired = 0;
  w.register_grad_ready_hook([&](const Tensor&) { ++fired; });
  Tensor x = randn({2, 256}, 2, DType::kF32);
  Tensor loss;
  for (int i = 0; i < 4; ++i) {
    Tensor l = mf::sum(mf::matmul(x, w));
    loss = loss.defined() ? mf::add(loss, l) : l;
  }
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  const int64_t before = a.stats().current_bytes, w_bytes = 256 * 256 * 4;
  a.reset_peak();
  loss.backward();
  EXPECT_LT(a.stats().peak_bytes - before, 2 * w_bytes) << "backward held more than one incoming gradient";
  EXPECT_EQ(fired, 1);
  Tensor want = mf::zeros({256, 256});
  for (int i = 0; i < 4; ++i) mf::add_(want, mf::matmul(mf::transpose(x, 0, 1), mf::ones({2, 256})));
  EXPECT_EQ(w.grad().to_vector<float>(), want.to_vector<float>());
}

// A tied table (an embedding and the output layer): the output layer's gradient reaches .grad
// first, and the embedding adds its rows into that .grad itself (accumulation_target), with no
// zero-filled table beside it. Its gradient equals the one taken through a non-leaf copy of the
// table (the dense path), whose backward peaks at least one table higher; the hook fires once.
TEST(Autograd, EmbeddingAddsItsRowsIntoAnExistingGrad) {
  const int64_t V = 512, C = 64;
  Tensor ids = mf::from_vector<int64_t>({3, 7, 3, 511, 0, 7, 7}, {7});
  Tensor x = randn({5, C}, 11), y = randn({5, V}, 12), r = randn({7, C}, 13);
  auto head = [&](const Tensor& table) { return mf::sum(mf::mul(mf::matmul(x, mf::transpose(table, 0, 1)), y)); };
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  auto backward_peak = [&](const Tensor& loss) {
    const int64_t before = a.stats().current_bytes;
    a.reset_peak();
    loss.backward();
    return a.stats().peak_bytes - before;
  };
  Tensor w = randn({V, C}, 14);
  w.set_requires_grad(true);
  int fired = 0;
  w.register_grad_ready_hook([&](const Tensor&) { ++fired; });
  const int64_t peak = backward_peak(mf::add(head(w), mf::sum(mf::mul(mf::embedding(w, ids), r))));
  EXPECT_EQ(fired, 1);

  Tensor w2 = mf::clone(w.detach());
  w2.set_requires_grad(true);  // the lookup reads a non-leaf: a dense gradient, summed into .grad
  const int64_t dense_peak = backward_peak(mf::add(head(w2), mf::sum(mf::mul(mf::embedding(mf::scale(w2, 1.0), ids), r))));
  EXPECT_LE(peak + V * C * 8, dense_peak) << "the embedding's backward held a table of its own";
  const std::vector<double> got = to_f64(w.grad()), want = to_f64(w2.grad());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
  // Against the output layer's gradient alone: row 7, looked up three times, gains three rows of r.
  Tensor w3 = mf::clone(w.detach());
  w3.set_requires_grad(true);
  head(w3).backward();
  const std::vector<double> h = to_f64(w3.grad()), rv = to_f64(r);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(got[7 * C + c] - h[7 * C + c], rv[1 * C + c] + rv[5 * C + c] + rv[6 * C + c], 1e-12);
    EXPECT_EQ(got[100 * C + c], h[100 * C + c]);  // a row never looked up
  }
}

// A weight used by several linear ops (the loss head's chunks): the later gradients are added
// into .grad by the GEMM itself (beta = 1), so backward makes one weight-sized gradient, not one
// per use; the sum equals the one taken through a non-leaf copy of the weight.
TEST(Autograd, LinearAddsItsWeightGradientIntoAnExistingGrad) {
  const int64_t V = 300, C = 32;
  Tensor h = randn({4, 6, C}, 21);
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  auto run = [&](const Tensor& used) {
    Tensor loss;
    for (int64_t c = 0; c < 3; ++c) {  // three chunks of rows, as the loss head cuts them
      Tensor l = mf::sum(mf::mul(mf::linear(mf::narrow(h, 0, c, 1), used), mf::linear(mf::narrow(h, 0, c, 1), used)));
      loss = loss.defined() ? mf::add(loss, l) : l;
    }
    const int64_t before = a.stats().num_allocs;
    a.reset_peak();
    const int64_t base = a.stats().current_bytes;
    loss.backward();
    return std::make_pair(a.stats().num_allocs - before, a.stats().peak_bytes - base);
  };
  Tensor w = randn({V, C}, 22);
  w.set_requires_grad(true);
  int fired = 0;
  w.register_grad_ready_hook([&](const Tensor&) { ++fired; });
  const auto [allocs, peak] = run(w);
  EXPECT_EQ(fired, 1);
  Tensor w2 = mf::clone(w.detach());
  w2.set_requires_grad(true);
  const auto [dense_allocs, dense_peak] = run(mf::scale(w2, 1.0));  // each use's gradient made, then summed
  EXPECT_LE(allocs + 8, dense_allocs) << "a weight-sized gradient per use";  // 11 vs 22; 16 without
  EXPECT_LE(peak + V * C * 8, dense_peak);
  const std::vector<double> got = to_f64(w.grad()), want = to_f64(w2.grad());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = randn({3}, 1);
  x.set_requires_grad(true);
  {
    mf::NoGradGuard ng;
    Tensor y = mf::mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(mf::mul(x, x).requires_grad());
}

TEST(Autograd, BackwardThroughFreedGraphThrows) {
  Tensor x = randn({3}, 2);
  x.set_requires_grad(true);
  Tensor loss = mf::sum(mf::mul(x, x));
  loss.backward();
  MFT_EXPECT_ERROR(loss.backward(), "already been freed", "retain_graph");
  Tensor loss2 = mf::sum(mf::mul(x, x));
  loss2.backward(Tensor(), /*retain_graph=*/true);
  loss2.backward();  // allowed once more
}

TEST(Autograd, ErrorsAreClear) {
  Tensor x = randn({3}, 3);
  MFT_EXPECT_ERROR(mf::sum(x).backward(), "does not require grad");
  x.set_requires_grad(true);
  Tensor y = mf::mul(x, x);
  MFT_EXPECT_ERROR(y.backward(), "implicit gradient only for one-element");
  MFT_EXPECT_ERROR(y.set_requires_grad(false), "only leaf tensors");
  MFT_EXPECT_ERROR(mf::fill_(x, 0.0), "fill_", "requires grad");
  MFT_EXPECT_ERROR(mf::arange(3).set_requires_grad(true), "not floating point");
}

TEST(Autograd, GradReadyHookFiresOnceWithFinalGradient) {
  Tensor w1 = randn({4}, 4), w2 = randn({4}, 5);
  w1.set_requires_grad(true);
  w2.set_requires_grad(true);
  std::vector<std::string> order;
  std::vector<double> seen;
  w1.register_grad_ready_hook([&](const Tensor& p) {
    order.push_back("w1");
    seen = to_f64(p.grad());
  });
  w2.register_grad_ready_hook([&](const Tensor&) { order.push_back("w2"); });
  // w1 is used twice (early and late); its hook must wait for both contributions.
  Tensor h = mf::mul(w1, w2);
  Tensor out = mf::sum(mf::mul(h, w1));  // w1^2 * w2
  out.backward();
  ASSERT_EQ(order.size(), 2u);
  std::vector<double> a = to_f64(w1), b = to_f64(w2);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(seen[i], 2 * a[i] * b[i], 1e-12);
  EXPECT_EQ(seen, to_f64(w1.grad()));
}

TEST(Autograd, HooksFireDuringBackwardInReverseUseOrder) {
  // Parameters used late in forward are final early in backward (what DP bucketing needs).
  std::vector<Tensor> ws;
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    ws.push_back(randn({2, 2}, 10 + i));
    ws.back().set_requires_grad(true);
    ws.back().register_grad_ready_hook([&order, i](const Tensor&) { order.push_back(i); });
  }
  Tensor h = randn({1, 2}, 20);
  for (auto& w : ws) h = mf::matmul(h, w);
  mf::sum(h).backward();
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
}

}  // namespace
