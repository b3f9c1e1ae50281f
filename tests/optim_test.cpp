// Optimizers against naive f64 update loops; clipping; learning-rate schedules.
#include <cmath>

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
