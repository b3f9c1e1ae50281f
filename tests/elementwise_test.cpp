// Elementwise ops and activations: values against naive f64 loops, gradients by finite
// differences on broadcast and non-contiguous inputs.
#include <cmath>
#include <random>

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

namespace {
using namespace mft;

TEST(Elementwise, GradUnaryOps) {
  Tensor pos = mf::add_scalar(rand_uniform({3, 4}, 0.0, 1.0, 21), 0.5);  // log/sqrt domain
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"scale", [](const Tensor& t) { return mf::scale(t, -1.7); }},
      {"add_scalar", [](const Tensor& t) { return mf::add_scalar(t, 0.3); }},
      {"neg", [](const Tensor& t) { return mf::neg(t); }},
      {"exp", [](const Tensor& t) { return mf::exp(t); }},
      {"log", [](const Tensor& t) { return mf::log(t); }},
      {"sqrt", [](const Tensor& t) { return mf::sqrt(t); }},
      {"contiguous", [](const Tensor& t) { return mf::contiguous(t); }},
      {"clone", [](const Tensor& t) { return mf::clone(t); }},
      {"transpose", [](const Tensor& t) { return mf::transpose(t, 0, 1); }},
  };
  for (auto& [name, op] : ops) {
    gradcheck([&op](const std::vector<Tensor>& in) { return op(in[0]); }, {pos}, 1e-6, 1e-7, 1e-5, name);
    gradcheck([&op](const std::vector<Tensor>& in) { return op(in[0]); }, {non_contiguous(pos)}, 1e-6, 1e-7, 1e-5, name);
  }
}

// Random ranks and sizes, random axes broadcast on either side, random non-contiguity.
TEST(Elementwise, GradBinaryRandomShapes) {
  std::mt19937 rng(123);
  for (int trial = 0; trial < 12; ++trial) {
    int nd = 1 + static_cast<int>(rng() % 3);
    mf::Shape sa, sb;
    for (int d = 0; d < nd; ++d) {
      int64_t n = 1 + static_cast<int64_t>(rng() % 4);
      int which = static_cast<int>(rng() % 3);  // 0: both n, 1: a broadcasts, 2: b broadcasts
      sa.push_back(which == 1 ? 1 : n);
      sb.push_back(which == 2 ? 1 : n);
    }
    if (rng() % 2) sb.erase(sb.begin());  // b of lower rank
    Tensor a = randn(sa, 100 + trial), b = mf::add_scalar(rand_uniform(sb, 0.0, 1.0, 200 + trial), 1.0);
    if (rng() % 2) a = non_contiguous(a);
    if (rng() % 2) b = non_contiguous(b);
    for (auto op : {mf::add, mf::sub, mf::mul, mf::div})
      gradcheck([op](const std::vector<Tensor>& x) { return op(x[0], x[1]); }, {a, b}, 1e-6, 1e-7, 1e-5,
                "random shapes " + mf::shape_str(sa) + " " + mf::shape_str(sb));
  }
}

}  // namespace
