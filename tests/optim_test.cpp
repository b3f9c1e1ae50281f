// Optimizers against naive f64 update loops; clipping; learning-rate schedules.
#include <cmath>
#include <limits>

#include "meshflow/optim/optimizer.h"
#include "meshflow/optim/scheduler.h"
#include "testing.h"

namespace {
using namespace mft;

TEST(Optim, AdamWMatchesNaiveLoops) {
  Tensor p = randn({5, 3}, 1), b = randn({3}, 2);
  p.set_requires_grad(true);
  b.set_requires_grad(true);
  mf::optim::AdamW opt({{{{"p", p}}, 0.1}, {{{"b", b}}, 0.0}}, 0.01, 0.9, 0.95, 1e-8);
  std::vector<double> rp = to_f64(p), rb = to_f64(b), mp(15, 0), vp(15, 0), mb(3, 0), vb(3, 0);
  for (int step = 1; step <= 3; ++step) {
    Tensor gp = randn({5, 3}, 10 + step), gb = randn({3}, 20 + step);
    p.set_grad(gp);
    b.set_grad(gb);
    opt.step();
    auto ref = [&](std::vector<double>& w, std::vector<double>& m, std::vector<double>& v, const std::vector<double>& g,
                   double wd) {
      for (size_t i = 0; i < w.size(); ++i) {
        m[i] = 0.9 * m[i] + 0.1 * g[i];
        v[i] = 0.95 * v[i] + 0.05 * g[i] * g[i];
        double mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.95, step));
        w[i] = w[i] - 0.01 * wd * w[i] - 0.01 * mh / (std::sqrt(vh) + 1e-8);
      }
    };
    ref(rp, mp, vp, to_f64(gp), 0.1);
    ref(rb, mb, vb, to_f64(gb), 0.0);
  }
  expect_close(p, rp, 1e-12, 1e-14, "adamw p");
  expect_close(b, rb, 1e-12, 1e-14, "adamw b");
  EXPECT_EQ(opt.state_tensors().size(), 4u);
}

TEST(Optim, SgdMomentumMatchesNaiveLoops) {
  Tensor p = randn({4}, 3);
  p.set_requires_grad(true);
  mf::optim::Sgd opt({{{{"p", p}}, 0.01}}, 0.1, 0.9);
  std::vector<double> w = to_f64(p), buf(4, 0);
  for (int step = 0; step < 3; ++step) {
    Tensor g = randn({4}, 30 + step);
    p.set_grad(g);
    opt.step();
    std::vector<double> gv = to_f64(g);
    for (int i = 0; i < 4; ++i) {
      buf[i] = 0.9 * buf[i] + gv[i] + 0.01 * w[i];
      w[i] -= 0.1 * buf[i];
    }
  }
  expect_close(p, w, 1e-13, 1e-15, "sgd");
}

// The scale AdamW reads the gradients with (clipping, the loss scale) is applied inside its
// update on the CPU: the same words as scaling the gradients first, f32 and f64 alike; SGD's too.
TEST(Optim, GradScaleIsTheScaledGradientsUpdate) {
  for (mf::DType dt : {mf::DType::kF32, mf::DType::kF64}) {
    Tensor p = mf::cast(randn({7, 5}, 4), dt), q = mf::clone(p), r = mf::clone(p), u = mf::clone(p);
    for (Tensor* t : {&p, &q, &r, &u}) t->set_requires_grad(true);
    mf::optim::AdamW folded({{{{"p", p}}, 0.1}}, 0.01, 0.9, 0.95, 1e-8), first({{{{"q", q}}, 0.1}}, 0.01, 0.9, 0.95, 1e-8);
    mf::optim::Sgd sgd_folded({{{{"r", r}}, 0.01}}, 0.1, 0.9), sgd_first({{{{"u", u}}, 0.01}}, 0.1, 0.9);
    for (int step = 1; step <= 3; ++step) {
      const double s = 0.3 * step;
      Tensor g = mf::cast(randn({7, 5}, 40 + step), dt), scaled = mf::clone(g);
      mf::scale_(scaled, s);
      p.set_grad(mf::clone(g));
      r.set_grad(mf::clone(g));
      q.set_grad(scaled);
      u.set_grad(mf::clone(scaled));
      folded.set_grad_scale(s);
      sgd_folded.set_grad_scale(s);
      folded.step();
      first.step();
      sgd_folded.step();
      sgd_first.step();
      EXPECT_EQ(to_f64(p.grad()), to_f64(g)) << "the gradient itself is left as it is";
    }
    EXPECT_EQ(to_f64(p), to_f64(q)) << mf::dtype_name(dt);
    EXPECT_EQ(to_f64(r), to_f64(u)) << mf::dtype_name(dt);
  }
}

TEST(Optim, ClipFactor) {
  EXPECT_EQ(mf::optim::clip_factor(5.0, 10.0), 1.0);
  EXPECT_DOUBLE_EQ(mf::optim::clip_factor(5.0, 1.0), 1.0 / (5.0 + 1e-6));
  EXPECT_EQ(mf::optim::clip_factor(5.0, 0.0), 1.0);  // clipping off
  EXPECT_EQ(mf::optim::clip_factor(std::nan(""), 1.0), 1.0);
  EXPECT_EQ(mf::optim::clip_factor(std::numeric_limits<double>::infinity(), 1.0), 1.0);
}

TEST(Optim, ClipGradNorm) {
  Tensor a = randn({3}, 1), b = randn({2, 2}, 2);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  a.set_grad(mf::from_vector<double>({3, 0, 0}, {3}));
  b.set_grad(mf::from_vector<double>({0, 4, 0, 0}, {2, 2}));
  EXPECT_DOUBLE_EQ(mf::optim::clip_grad_norm({a, b}, 10.0), 5.0);
  EXPECT_EQ(to_f64(a.grad())[0], 3.0);  // under the limit: untouched
  EXPECT_DOUBLE_EQ(mf::optim::clip_grad_norm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(to_f64(a.grad())[0], 0.6, 1e-6);
  EXPECT_NEAR(to_f64(b.grad())[1], 0.8, 1e-6);
}

// norm_type = infinity: the largest |g| over all gradients (a negative element may be it), by hand.
TEST(Optim, ClipGradNormInfinityIsTheLargestAbsoluteElement) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor a = mf::zeros({3}), b = mf::zeros({2, 2}), unused = mf::zeros({2});
  for (Tensor* t : {&a, &b, &unused}) t->set_requires_grad(true);
  a.set_grad(mf::from_vector<float>({0.5f, -2.0f, 1.0f}, {3}));
  b.set_grad(mf::from_vector<float>({1.5f, -0.25f, 0.0f, -4.0f}, {2, 2}));  // |-4| is the largest
  EXPECT_DOUBLE_EQ(mf::optim::clip_grad_norm({a, b, unused}, 10.0, 1.0, inf), 4.0);
  EXPECT_EQ(to_f64(b.grad())[3], -4.0);  // under the limit: untouched
  // Over the limit: every gradient times max_norm / (norm + 1e-6) = 2 / (4 + 1e-6).
  EXPECT_DOUBLE_EQ(mf::optim::clip_grad_norm({a, b, unused}, 2.0, 1.0, inf), 4.0);
  const double s = 2.0 / (4.0 + 1e-6);
  const std::vector<double> ga = to_f64(a.grad()), gb = to_f64(b.grad());
  const std::vector<double> want_a = {0.5 * s, -2.0 * s, 1.0 * s}, want_b = {1.5 * s, -0.25 * s, 0.0, -4.0 * s};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(ga[i], want_a[i], 1e-6);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(gb[i], want_b[i], 1e-6);
  // A loss scale: the gradients hold 8 x the true ones; the true norm is returned.
  a.set_grad(mf::from_vector<float>({8.0f, -24.0f, 0.0f}, {3}));
  b.set_grad(Tensor());
  EXPECT_DOUBLE_EQ(mf::optim::clip_grad_norm({a, b}, 0.0, 8.0, inf), 3.0);
  // Non-finite gradients: +inf gives inf, NaN gives NaN (an fp16 overflow must not look finite);
  // the gradients are left alone.
  a.set_grad(mf::from_vector<float>({1.0f, -std::numeric_limits<float>::infinity(), 0.0f}, {3}));
  EXPECT_EQ(mf::optim::clip_grad_norm({a}, 1.0, 1.0, inf), inf);
  a.set_grad(mf::from_vector<float>({5.0f, std::nanf(""), 1.0f}, {3}));
  EXPECT_TRUE(std::isnan(mf::optim::clip_grad_norm({a}, 1.0, 1.0, inf)));
  EXPECT_EQ(to_f64(a.grad())[0], 5.0);
  // bf16 gradients (mixed precision) are widened; f64 ones read as they are.
  EXPECT_DOUBLE_EQ(mf::optim::max_abs({mf::cast(mf::from_vector<float>({0.5f, -3.0f, 2.0f}, {3}), mf::DType::kBF16)}), 3.0);
  EXPECT_DOUBLE_EQ(mf::optim::max_abs({mf::from_vector<double>({-1e-300, 0.0}, {2})}), 1e-300);
  EXPECT_EQ(mf::optim::max_abs({}), 0.0);
}

TEST(Optim, ClipGradNormRejectsOtherNormTypes) {
  Tensor a = mf::zeros({2});
  a.set_requires_grad(true);
  a.set_grad(mf::ones({2}));
  MFT_EXPECT_ERROR(mf::optim::clip_grad_norm({a}, 1.0, 1.0, 1.0), "must be 2.0 (the L2 norm) or .inf");
  MFT_EXPECT_ERROR(mf::optim::check_clip_norm_type(3.0, "optim.clip_grad_norm_type"), "optim.clip_grad_norm_type must be");
}

TEST(Optim, ParamGroupsSkipDecayOnBiasesAndNorms) {
  struct M : mf::nn::Module {
    M() {
      register_parameter("w", mf::zeros({2, 2}));
      register_parameter("bias", mf::zeros({2}));
    }
  } m;
  auto groups = mf::optim::default_param_groups(m, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params[0].first, "w");
  EXPECT_EQ(groups[0].weight_decay, 0.1);
  EXPECT_EQ(groups[1].params[0].first, "bias");
  EXPECT_EQ(groups[1].weight_decay, 0.0);
}

TEST(Scheduler, WarmupThenDecay) {
  mf::optim::SchedulerConfig c;
  c.base_lr = 1.0;
  c.total_iters = 110;
  c.warmup_iters = 10;
  c.warmup_factor = 0.0;
  c.alpha = 0.1;
  mf::optim::LrScheduler cos(c);
  EXPECT_DOUBLE_EQ(cos.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(cos.lr_at(5), 0.5);
  EXPECT_DOUBLE_EQ(cos.lr_at(10), 1.0);
  EXPECT_NEAR(cos.lr_at(60), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(cos.lr_at(110), 0.1, 1e-12);
  c.name = "linear";
  EXPECT_NEAR(mf::optim::LrScheduler(c).lr_at(60), 1.0 - 0.9 * 0.5, 1e-12);
  c.name = "multistep";
  c.milestones = {20, 50};
  c.gamma = 0.5;
  mf::optim::LrScheduler ms(c);
  EXPECT_DOUBLE_EQ(ms.lr_at(19), 1.0);
  EXPECT_DOUBLE_EQ(ms.lr_at(20), 0.5);
  EXPECT_DOUBLE_EQ(ms.lr_at(60), 0.25);
  c.name = "constant";
  EXPECT_DOUBLE_EQ(mf::optim::LrScheduler(c).lr_at(100), 1.0);
  c.name = "cosin";
  MFT_EXPECT_ERROR(mf::optim::LrScheduler{c}, "unknown schedule 'cosin'");
}

}  // namespace
