// layer_norm, rms_norm, softmax, log_softmax and activations: f32 forward and backward equal
// naive f64 formulas written here to 1e-5 relative; f64 finite-difference gradient checks.
#include <cmath>

#include "testing.h"

namespace {
using namespace mft;

struct Grads {
  std::vector<double> y, dx, dw, db;
};

// Naive layer norm (rms = false) or RMS norm over rows of (N, C), with upstream gradient g.
Grads naive_norm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<double>& g, int N, int C, double eps, bool rms) {
  Grads r{std::vector<double>(N * C), std::vector<double>(N * C), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (int n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    for (int c = 0; c < C; ++c) mu += x[n * C + c] / C;
    if (rms) mu = 0;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - mu) * (x[n * C + c] - mu) / C;
    double rs = 1.0 / std::sqrt(var + eps);
    std::vector<double> xh(C), gh(C);
    double mg = 0, mgx = 0;
    for (int c = 0; c < C; ++c) {
      xh[c] = (x[n * C + c] - mu) * rs;
      r.y[n * C + c] = xh[c] * w[c] + (b.empty() ? 0.0 : b[c]);
      gh[c] = g[n * C + c] * w[c];
      mg += gh[c] / C;
      mgx += gh[c] * xh[c] / C;
      r.dw[c] += g[n * C + c] * xh[c];
      r.db[c] += g[n * C + c];
    }
    for (int c = 0; c < C; ++c) r.dx[n * C + c] = rs * (gh[c] - (rms ? 0.0 : mg) - xh[c] * mgx);
  }
  return r;
}

Tensor f32(const Tensor& t) { return mf::cast(t, DType::kF32); }

TEST(Norm, LayerNormMatchesNaive) {
  int N = 7, C = 96;
  Tensor x = randn({N, C}, 1), w = randn({C}, 2), b = randn({C}, 3), g = randn({N, C}, 4);
  x = mf::add_scalar(x, 3.0);  // a mean far from 0
  Grads ref = naive_norm(to_f64(x), to_f64(w), to_f64(b), to_f64(g), N, C, 1e-5, false);
  Tensor xf = f32(x), wf = f32(w), bf = f32(b);
  for (Tensor* t : {&xf, &wf, &bf}) t->set_requires_grad(true);
  Tensor y = mf::layer_norm(xf, wf, bf, 1e-5);
  y.backward(f32(g));
  expect_rel_close(y, ref.y, 1e-5, "layer_norm y");
  expect_rel_close(xf.grad(), ref.dx, 1e-5, "layer_norm dx");
  expect_rel_close(wf.grad(), ref.dw, 1e-5, "layer_norm dw");
  expect_rel_close(bf.grad(), ref.db, 1e-5, "layer_norm db");
}

TEST(Norm, RmsNormMatchesNaive) {
  int N = 5, C = 64;
  Tensor x = randn({N, C}, 5), w = randn({C}, 6), g = randn({N, C}, 7);
  Grads ref = naive_norm(to_f64(x), to_f64(w), {}, to_f64(g), N, C, 1e-6, true);
  Tensor xf = f32(x), wf = f32(w);
  xf.set_requires_grad(true);
  wf.set_requires_grad(true);
  Tensor y = mf::rms_norm(xf, wf, 1e-6);
  y.backward(f32(g));
  expect_rel_close(y, ref.y, 1e-5, "rms_norm y");
  expect_rel_close(xf.grad(), ref.dx, 1e-5, "rms_norm dx");
  expect_rel_close(wf.grad(), ref.dw, 1e-5, "rms_norm dw");
}

TEST(Norm, Gradients) {
  gradcheck([](const std::vector<Tensor>& in) { return mf::layer_norm(in[0], in[1], in[2], 1e-5); },
            {non_contiguous(randn({4, 6}, 1)), randn({6}, 2), randn({6}, 3)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::layer_norm(in[0], in[1], Tensor(), 1e-5); },
            {randn({2, 3, 5}, 4), randn({5}, 5)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::rms_norm(in[0], in[1], 1e-6); },
            {non_contiguous(randn({3, 5}, 6)), randn({5}, 7)});
  MFT_EXPECT_ERROR(mf::layer_norm(randn({2, 4}, 1), randn({5}, 2), Tensor()), "layer_norm", "weight", "(5,)");
}

TEST(Softmax, MatchesNaive) {
  int N = 6, C = 300;
  Tensor x = mf::scale(randn({N, C}, 8), 4.0), g = randn({N, C}, 9);
  std::vector<double> xv = to_f64(x), gv = to_f64(g), y(N * C), ly(N * C), dx(N * C), ldx(N * C);
  for (int n = 0; n < N; ++n) {
    double m = -1e300, s = 0, dot = 0, gs = 0;
    for (int c = 0; c < C; ++c) m = std::max(m, xv[n * C + c]);
    for (int c = 0; c < C; ++c) s += std::exp(xv[n * C + c] - m);
    for (int c = 0; c < C; ++c) {
      y[n * C + c] = std::exp(xv[n * C + c] - m) / s;
      ly[n * C + c] = xv[n * C + c] - m - std::log(s);
      dot += gv[n * C + c] * y[n * C + c];
      gs += gv[n * C + c];
    }
    for (int c = 0; c < C; ++c) {
      dx[n * C + c] = y[n * C + c] * (gv[n * C + c] - dot);
      ldx[n * C + c] = gv[n * C + c] - y[n * C + c] * gs;
    }
  }
  for (bool log : {false, true}) {
    Tensor xf = f32(x);
    xf.set_requires_grad(true);
    Tensor out = log ? mf::log_softmax(xf) : mf::softmax(xf);
    out.backward(f32(g));
    expect_rel_close(out, log ? ly : y, 1e-5, log ? "log_softmax" : "softmax");
    expect_rel_close(xf.grad(), log ? ldx : dx, 1e-5, log ? "log_softmax dx" : "softmax dx");
  }
}

TEST(Softmax, GradientsAndAxes) {
  gradcheck([](const std::vector<Tensor>& in) { return mf::softmax(in[0]); }, {non_contiguous(randn({3, 5}, 1))});
  gradcheck([](const std::vector<Tensor>& in) { return mf::log_softmax(in[0]); }, {randn({2, 3, 4}, 2)});
  gradcheck([](const std::vector<Tensor>& in) { return mf::softmax(in[0], 1); }, {randn({2, 3, 4}, 3)});
  Tensor x = randn({2, 3, 4}, 4);
  std::vector<double> a = to_f64(mf::softmax(x, 1)), b = to_f64(mf::permute(mf::softmax(mf::permute(x, {0, 2, 1})), {0, 2, 1}));
  expect_close(mf::softmax(x, 1), b, 1e-15, 1e-15, "softmax axis 1");
}

// Activations: forward and derivative from closed forms in f64.
TEST(Activation, MatchNaive) {
  Tensor x = mf::scale(randn({4, 257}, 10), 3.0), g = randn({4, 257}, 11);
  std::vector<double> xv = to_f64(x), gv = to_f64(g);
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> f, df;
  };
  const double k = std::sqrt(2.0 / M_PI);
  std::vector<Case> cases = {
      {"gelu_tanh", [](const Tensor& t) { return mf::gelu(t, true); },
       [k](double v) { return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))); },
       [k](double v) {
         double t = std::tanh(k * (v + 0.044715 * v * v * v));
         return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
       }},
      {"gelu_erf", [](const Tensor& t) { return mf::gelu(t, false); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); },
       [](double v) { return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI); }},
      {"silu", [](const Tensor& t) { return mf::silu(t); }, [](double v) { return v / (1 + std::exp(-v)); },
       [](double v) {
         double s = 1 / (1 + std::exp(-v));
         return s * (1 + v * (1 - s));
       }},
      {"relu", [](const Tensor& t) { return mf::relu(t); }, [](double v) { return v > 0 ? v : 0.0; },
       [](double v) { return v > 0 ? 1.0 : 0.0; }},
      {"tanh", [](const Tensor& t) { return mf::tanh(t); }, [](double v) { return std::tanh(v); },
       [](double v) { return 1 - std::tanh(v) * std::tanh(v); }},
  };
  for (const auto& c : cases) {
    std::vector<double> y, dx;
    for (size_t i = 0; i < xv.size(); ++i) {
      y.push_back(c.f(xv[i]));
      dx.push_back(gv[i] * c.df(xv[i]));
    }
    Tensor xf = f32(x);
    xf.set_requires_grad(true);
    Tensor out = c.op(xf);
    out.backward(f32(g));
    expect_rel_close(out, y, 1e-5, c.name);
    expect_rel_close(xf.grad(), dx, 1e-5, std::string(c.name) + " dx");
    gradcheck([&c](const std::vector<Tensor>& in) { return c.op(in[0]); }, {non_contiguous(randn({3, 4}, 12))}, 1e-6,
              1e-7, 1e-5, c.name);
  }
}

}  // namespace
