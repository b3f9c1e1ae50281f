// scaled_dot_product_attention: forward and analytic backward against naive f64 loops
// (causal, padding mask, strided views, Tq != Tk, fully masked rows, dropout), finite-
// difference gradient checks, dropout determinism, and input errors.
#include <cmath>

#include "meshflow/layers/attention.h"
#include "meshflow/random/philox.h"
#include "meshflow/tensor/allocator.h"
#include "testing.h"

namespace {
using namespace mft;

struct RefCase {
  int64_t B = 2, H = 2, Tq = 9, Tk = 9, D = 8;
  bool causal = false;
  int64_t window = 0;      // sliding window (causal): keys (i - window, i]
  std::vector<bool> mask;  // (B, Tk), empty: none
  double p = 0.0;          // dropout
  uint64_t seed = 0, stream = 0;
};

struct RefOut {
  std::vector<double> o, dq, dk, dv;  // logical (B,H,T,D) order
};

// Naive f64 attention and its analytic gradients for upstream gradient `g`.
RefOut reference(const RefCase& c, const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& v, const std::vector<double>& g) {
  const int64_t B = c.B, H = c.H, Tq = c.Tq, Tk = c.Tk, D = c.D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  RefOut r;
  r.o.assign(B * H * Tq * D, 0.0);
  r.dq.assign(B * H * Tq * D, 0.0);
  r.dk.assign(B * H * Tk * D, 0.0);
  r.dv.assign(B * H * Tk * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      auto Q = [&](int64_t i, int64_t d) { return q[(bh * Tq + i) * D + d]; };
      auto K = [&](int64_t j, int64_t d) { return k[(bh * Tk + j) * D + d]; };
      auto Vv = [&](int64_t j, int64_t d) { return v[(bh * Tk + j) * D + d]; };
      auto G = [&](int64_t i, int64_t d) { return g[(bh * Tq + i) * D + d]; };
      for (int64_t i = 0; i < Tq; ++i) {
        std::vector<double> s(Tk), P(Tk, 0.0), M(Tk, 1.0 / (1.0 - c.p));
        std::vector<bool> ok(Tk);
        double mx = -INFINITY;
        for (int64_t j = 0; j < Tk; ++j) {
          const int64_t pos = i + Tk - Tq;  // causal: the queries are the last Tq positions
          ok[j] = !(c.causal && j > pos) && !(c.window > 0 && j <= pos - c.window) &&
                  !(!c.mask.empty() && c.mask[b * Tk + j]);
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += Q(i, d) * K(j, d);
          s[j] = scale * acc;
          if (ok[j]) mx = std::max(mx, s[j]);
          if (c.p > 0 && !(mf::philox_uniform(c.seed, c.stream, (bh * Tq + i) * Tk + j) >= c.p)) M[j] = 0.0;
        }
        if (mx == -INFINITY) continue;  // fully masked: zero output and gradients
        double sum = 0;
        for (int64_t j = 0; j < Tk; ++j)
          if (ok[j]) sum += std::exp(s[j] - mx);
        for (int64_t j = 0; j < Tk; ++j) P[j] = ok[j] ? std::exp(s[j] - mx) / sum : 0.0;
        std::vector<double> dP(Tk);
        double rowsum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          double pd = P[j] * M[j], dpd = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.o[(bh * Tq + i) * D + d] += pd * Vv(j, d);
            r.dv[(bh * Tk + j) * D + d] += pd * G(i, d);
            dpd += G(i, d) * Vv(j, d);
          }
          dP[j] = dpd * M[j];
          rowsum += P[j] * dP[j];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          double ds = P[j] * (dP[j] - rowsum);
          for (int64_t d = 0; d < D; ++d) {
            r.dq[(bh * Tq + i) * D + d] += scale * ds * K(j, d);
            r.dk[(bh * Tk + j) * D + d] += scale * ds * Q(i, d);
          }
        }
      }
    }
  return r;
}

Tensor bool_mask(const std::vector<bool>& m, int64_t B, int64_t Tk) {
  Tensor t = mf::empty({B, Tk}, DType::kBool);
  bool* p = t.data<bool>();
  for (int64_t i = 0; i < B * Tk; ++i) p[i] = m[i];
  return t;
}

// Runs the op in f32 on (B,H,T,D) inputs, either contiguous or as permuted views of
// (B,T,H,D) storage, and compares output and gradients with the f64 reference.
void check_against_reference(const RefCase& c, bool strided, const std::string& what) {
  Shape qs{c.B, c.H, c.Tq, c.D}, ks{c.B, c.H, c.Tk, c.D};
  Tensor q64 = randn(qs, 11), k64 = randn(ks, 12), v64 = randn(ks, 13), g64 = randn(qs, 14);
  Tensor q32 = mf::cast(q64, DType::kF32), k32 = mf::cast(k64, DType::kF32), v32 = mf::cast(v64, DType::kF32);
  Tensor g32 = mf::cast(g64, DType::kF32);
  // leaves: the (B,H,T,D) tensors, or their (B,T,H,D) storage when strided
  auto leaf = [&](const Tensor& t) {
    Tensor l = strided ? mf::contiguous(mf::transpose(t, 1, 2)) : mf::clone(t);
    l.set_requires_grad(true);
    return l;
  };
  Tensor lq = leaf(q32), lk = leaf(k32), lv = leaf(v32);
  auto use = [&](const Tensor& l) { return strided ? mf::transpose(l, 1, 2) : l; };
  mf::AttentionOptions opts;
  opts.causal = c.causal;
  opts.window = c.window;
  if (!c.mask.empty()) opts.key_padding_mask = bool_mask(c.mask, c.B, c.Tk);
  mf::Generator gen(c.seed);
  opts.dropout_p = c.p;
  opts.gen = &gen;
  Tensor out = mf::scaled_dot_product_attention(use(lq), use(lk), use(lv), opts);
  ASSERT_EQ(out.shape(), qs) << what;
  EXPECT_TRUE(mf::transpose(out, 1, 2).is_contiguous()) << what << ": out must be a (B,Tq,H,D) buffer";
  mf::sum(mf::mul(out, g32)).backward();
  RefOut r = reference(c, to_f64(q32), to_f64(k32), to_f64(v32), to_f64(g32));
  const double rtol = 1e-5, atol = 1e-6;
  expect_close(out, r.o, rtol, atol, what + " out");
  expect_close(use(lq.grad()), r.dq, rtol, atol, what + " dq");
  expect_close(use(lk.grad()), r.dk, rtol, atol, what + " dk");
  expect_close(use(lv.grad()), r.dv, rtol, atol, what + " dv");
}

TEST(Attention, MatchesReferenceNonCausal) {
  RefCase c;
  check_against_reference(c, false, "non-causal");
}

TEST(Attention, MatchesReferenceCausalAcrossBlocks) {
  RefCase c;
  c.B = 1, c.H = 2, c.Tq = c.Tk = 150, c.D = 16, c.causal = true;  // > one query block
  check_against_reference(c, false, "causal");
  c.causal = false;
  check_against_reference(c, false, "non-causal long");
}

// Decoding: the queries are the last Tq of Tk positions (the keys before them cached), across
// query blocks, with a sliding window and with padding.
TEST(Attention, MatchesReferenceCausalQueriesAfterCachedKeys) {
  RefCase c;
  c.B = 2, c.H = 2, c.Tq = 70, c.Tk = 150, c.D = 16, c.causal = true;
  check_against_reference(c, false, "causal, 80 cached keys");
  c.Tq = 1;
  check_against_reference(c, false, "causal, one new query");
  c.Tq = 70, c.window = 20;
  check_against_reference(c, false, "causal window, cached keys");
  c.window = 0;
  c.mask.assign(c.B * c.Tk, false);
  for (int64_t j = 0; j < 30; ++j) c.mask[1 * 150 + j] = true;  // row 1 left-padded
  check_against_reference(c, false, "causal, cached keys, padding");
}

TEST(Attention, MatchesReferencePaddingMaskAndFullyMaskedRow) {
  RefCase c;
  c.Tq = c.Tk = 7;
  c.mask.assign(c.B * c.Tk, false);
  c.mask[0 * 7 + 5] = c.mask[0 * 7 + 6] = true;  // batch 0: last two keys are padding
  c.mask[1 * 7 + 0] = c.mask[1 * 7 + 3] = true;  // batch 1: key 0 masked -> with causal, row 0 empty
  check_against_reference(c, false, "padding");
  c.causal = true;
  check_against_reference(c, false, "padding causal");
  c.causal = false;
  for (int64_t j = 0; j < 7; ++j) c.mask[1 * 7 + j] = true;  // batch 1: every key masked
  check_against_reference(c, false, "all keys masked");
}

TEST(Attention, FullyMaskedRowIsZeroWithZeroGradients) {
  Tensor q = randn({1, 1, 3, 4}, 1), k = randn({1, 1, 3, 4}, 2), v = randn({1, 1, 3, 4}, 3);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  mf::AttentionOptions opts;
  opts.causal = true;
  opts.key_padding_mask = bool_mask({true, false, false}, 1, 3);
  Tensor out = mf::scaled_dot_product_attention(q, k, v, opts);
  mf::sum(out).backward();
  std::vector<double> o = to_f64(out), dq = to_f64(q.grad());
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(o[d], 0.0);
    EXPECT_EQ(dq[d], 0.0);
    EXPECT_TRUE(std::isfinite(o[4 + d]) && std::isfinite(dq[4 + d]));
  }
  for (double x : to_f64(k.grad())) EXPECT_TRUE(std::isfinite(x));
}

TEST(Attention, MatchesReferenceStridedViewsAndUnequalLengths) {
  RefCase c;
  check_against_reference(c, true, "strided");
  c.causal = true;
  check_against_reference(c, true, "strided causal");
  c.causal = false;
  c.Tq = 5, c.Tk = 13, c.D = 6;
  check_against_reference(c, true, "Tq < Tk strided");
  c.Tq = 140, c.Tk = 3;
  check_against_reference(c, false, "Tq > Tk");
}

TEST(Attention, MatchesReferenceWithDropout) {
  RefCase c;
  c.p = 0.3, c.seed = 1234;
  check_against_reference(c, false, "dropout");
  c.causal = true, c.Tq = c.Tk = 133;
  c.mask.assign(c.B * c.Tk, false);
  c.mask[3] = c.mask[c.Tk + 100] = true;
  check_against_reference(c, true, "dropout causal padding strided");
  // Rows with every key masked: no probability, so nothing dropped reaches dV (no stale draws).
  c.causal = false, c.Tq = c.Tk = 7;
  c.mask.assign(c.B * c.Tk, false);
  for (int64_t j = 0; j < 7; ++j) c.mask[1 * 7 + j] = true;
  check_against_reference(c, false, "dropout, every key of batch 1 masked");
  c.causal = true;
  check_against_reference(c, true, "dropout causal, every key of batch 1 masked");
}

// q, k and v unbound from one fused qkv projection (B, T, 3, H, D): their gradients are written
// as the same views of one buffer, which unbind's backward hands on whole as the leaf's .grad:
// two allocations fewer than through three separate leaves (a copy by unbind: one fewer),
// and the same gradient as through those three leaves.
TEST(Attention, UnboundQkvGradientIsWrittenInPlace) {
  const int64_t B = 2, T = 40, H = 3, D = 16;
  Tensor x = randn({B, T, 3, H, D}, 21, DType::kF32), g = randn({B, H, T, D}, 22, DType::kF32);
  mf::AttentionOptions opts;
  opts.causal = true;
  mf::Allocator& a = mf::allocator_for(mf::cpu_device());
  auto backward_allocs = [&](const Tensor& out) {
    Tensor loss = mf::sum(mf::mul(out, g));
    const int64_t before = a.stats().num_allocs;
    loss.backward();
    return a.stats().num_allocs - before;
  };
  Tensor qkv = mf::clone(x);
  qkv.set_requires_grad(true);
  std::vector<Tensor> p = mf::unbind(qkv, 2);  // each (B, T, H, D), strided
  Tensor out = mf::scaled_dot_product_attention(mf::transpose(p[0], 1, 2), mf::transpose(p[1], 1, 2),
                                                mf::transpose(p[2], 1, 2), opts);
  const int64_t packed = backward_allocs(out);

  std::vector<Tensor> leaves;
  for (int64_t i = 0; i < 3; ++i) {
    leaves.push_back(mf::contiguous(mf::squeeze(mf::narrow(x, 2, i, 1), 2)));
    leaves.back().set_requires_grad(true);
  }
  Tensor out2 = mf::scaled_dot_product_attention(mf::transpose(leaves[0], 1, 2), mf::transpose(leaves[1], 1, 2),
                                                 mf::transpose(leaves[2], 1, 2), opts);
  const int64_t separate = backward_allocs(out2);
  EXPECT_LE(packed + 2, separate) << "the qkv gradient was not written in place";
  EXPECT_EQ(out.to_vector<float>(), out2.to_vector<float>());
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(mf::contiguous(mf::squeeze(mf::narrow(qkv.grad(), 2, i, 1), 2)).to_vector<float>(),
              leaves[i].grad().to_vector<float>())
        << i;
}

TEST(Attention, DropoutIsReproducible) {
  Tensor q = randn({2, 2, 6, 4}, 1, DType::kF32), k = randn({2, 2, 6, 4}, 2, DType::kF32);
  Tensor v = randn({2, 2, 6, 4}, 3, DType::kF32);
  mf::Generator g(99);
  mf::AttentionOptions opts;
  opts.dropout_p = 0.5;
  opts.gen = &g;
  mf::GeneratorState st = g.state();
  std::vector<double> a = to_f64(mf::scaled_dot_product_attention(q, k, v, opts));
  EXPECT_EQ(g.state().next_stream, st.next_stream + 1);
  std::vector<double> b = to_f64(mf::scaled_dot_product_attention(q, k, v, opts));
  g.set_state(st);
  std::vector<double> c = to_f64(mf::scaled_dot_product_attention(q, k, v, opts));
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
  opts.dropout_p = 0.0;  // no dropout: no stream taken
  st = g.state();
  mf::scaled_dot_product_attention(q, k, v, opts);
  EXPECT_EQ(g.state(), st);
}

mf::AttentionOptions grad_opts(bool causal, const Tensor& mask) {
  mf::AttentionOptions o;
  o.causal = causal;
  o.key_padding_mask = mask;
  return o;
}

TEST(Attention, GradcheckMaskAndCausal) {
  Tensor q = randn({2, 2, 5, 4}, 1), k = randn({2, 2, 5, 4}, 2), v = randn({2, 2, 5, 4}, 3);
  Tensor mask = bool_mask({false, false, false, true, true, true, false, false, false, false}, 2, 5);
  for (bool causal : {false, true})
    gradcheck([&](const std::vector<Tensor>& x) {
      return mf::scaled_dot_product_attention(x[0], x[1], x[2], grad_opts(causal, mask));
    }, {q, k, v}, 1e-6, 1e-7, 1e-5, causal ? "causal + mask" : "mask");
  Tensor k2 = randn({2, 2, 7, 4}, 4), v2 = randn({2, 2, 7, 4}, 5);
  gradcheck([&](const std::vector<Tensor>& x) {
    return mf::scaled_dot_product_attention(mf::transpose(x[0], 1, 2), x[1], x[2], grad_opts(false, Tensor()));
  }, {mf::contiguous(mf::transpose(q.detach(), 1, 2)).detach(), k2, v2}, 1e-6, 1e-7, 1e-5, "Tq != Tk, strided q");
}

TEST(Attention, GradcheckDropout) {
  Tensor q = randn({2, 2, 5, 4}, 6), k = randn({2, 2, 5, 4}, 7), v = randn({2, 2, 5, 4}, 8);
  gradcheck([](const std::vector<Tensor>& x) {
    mf::Generator g(7);  // fresh every evaluation: the same dropout mask each time
    mf::AttentionOptions o;
    o.causal = true;
    o.dropout_p = 0.25;
    o.gen = &g;
    o.scale = 0.7;
    return mf::scaled_dot_product_attention(x[0], x[1], x[2], o);
  }, {q, k, v}, 1e-6, 1e-7, 1e-5, "dropout");
}

TEST(Attention, BadInputs) {
  Tensor q = randn({2, 2, 5, 4}, 1), k = randn({2, 2, 5, 4}, 2), v = randn({2, 2, 5, 4}, 3);
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(mf::reshape(q, {4, 5, 4}), k, v), "scaled_dot_product_attention",
                   "rank 4", "(4, 5, 4)");
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, randn({2, 2, 5, 3}, 4), v), "scaled_dot_product_attention",
                   "head dim", "(2, 2, 5, 3)");
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, mf::cast(k, DType::kF32), v), "scaled_dot_product_attention",
                   "dtype");
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, randn({2, 2, 6, 4}, 4), v), "scaled_dot_product_attention",
                   "(2, 2, 6, 4)");
  mf::AttentionOptions o;
  o.key_padding_mask = mf::zeros({2, 4}, DType::kBool);
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, k, v, o), "scaled_dot_product_attention", "key_padding_mask",
                   "(2, 4)");
  o.key_padding_mask = mf::zeros({2, 5}, DType::kF64);
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, k, v, o), "scaled_dot_product_attention", "bool");
  mf::AttentionOptions c;
  c.causal = true;
  Tensor k4 = randn({2, 2, 4, 4}, 5);  // q has 5 positions: more queries than keys
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, k4, k4, c), "scaled_dot_product_attention", "causal", "Tq <= Tk");
  c.causal = false;
  c.dropout_p = 1.0;
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, k, v, c), "scaled_dot_product_attention", "dropout_p");
}

// Mistral's sliding window: query i sees keys (i - window, i]; across query blocks, with padding
// and dropout.
TEST(Attention, MatchesReferenceSlidingWindow) {
  RefCase c;
  c.B = 1, c.H = 2, c.Tq = c.Tk = 150, c.D = 8, c.causal = true, c.window = 37;
  check_against_reference(c, false, "window 37");
  c.B = 2, c.Tq = c.Tk = 9, c.window = 3, c.mask = {false, true, false, false, false, false, false, false, false,
                                                     false, false, false, false, false, false, false, true, false};
  c.p = 0.3, c.seed = 5;
  check_against_reference(c, true, "window 3, padding, dropout, strided");
  Tensor q = randn({1, 2, 6, 4}, 1), k = randn({1, 2, 6, 4}, 2), v = randn({1, 2, 6, 4}, 3);
  gradcheck([&](const std::vector<Tensor>& x) {
    mf::AttentionOptions o = grad_opts(true, Tensor());
    o.window = 2;
    return mf::scaled_dot_product_attention(x[0], x[1], x[2], o);
  }, {q, k, v}, 1e-6, 1e-7, 1e-5, "window 2");
  mf::AttentionOptions bad;
  bad.window = 3;
  MFT_EXPECT_ERROR(mf::scaled_dot_product_attention(q, k, v, bad), "sliding window (3)", "causal");
}

}  // namespace

// The shared layer's unfused core (layers::Attention with eager: T5's, and any attention with a
// bias on its scores) against the fused kernel on the same weights, in f64: scaled scores, causal
// and padding masks, cross-attention to a padded memory, a zero bias; outputs and the gradients
// of the input, the memory and every weight.
TEST(Attention, LayerEagerCoreMatchesTheFusedKernel) {
  const mf::layers::Place one;  // a single process
  const int64_t B = 2, T = 7, Tm = 5, C = 8, H = 2;
  for (const bool cross : {false, true}) {
    SCOPED_TRACE(cross ? "cross-attention" : "self-attention");
    mf::layers::AttentionSpec s;
    s.hidden = C;
    s.heads = H;
    s.causal = !cross;
    s.scale = 0.5;
    s.q = "q";
    s.k = "k";
    s.v = "v";
    s.out = "o";
    mf::layers::AttentionSpec e = s;
    e.eager = true;
    mf::nn::ModuleGroup fused_group, eager_group;
    const mf::layers::Attention fused(s, fused_group, one, DType::kF64), eager(e, eager_group, one, DType::kF64);
    {
      mf::NoGradGuard ng;
      uint64_t seed = 10;
      auto fused_params = fused_group.named_parameters(), eager_params = eager_group.named_parameters();
      ASSERT_EQ(fused_params.size(), eager_params.size());
      for (size_t i = 0; i < fused_params.size(); ++i) {
        const Tensor w = randn(fused_params[i].second.shape(), ++seed);
        mf::copy_(fused_params[i].second, w);
        mf::copy_(eager_params[i].second, w);
      }
    }
    Tensor pad = mf::zeros({B, cross ? Tm : T}, DType::kBool);  // row 1's last two keys are padding
    pad.data<bool>()[(cross ? Tm : T) * 2 - 1] = pad.data<bool>()[(cross ? Tm : T) * 2 - 2] = true;
    mf::layers::AttentionInputs in;
    in.key_padding = pad;
    std::vector<Tensor> grads[2];
    Tensor out[2];
    for (int k = 0; k < 2; ++k) {
      Tensor x = randn({B, T, C}, 1), m = randn({B, Tm, C}, 2);
      x.set_requires_grad(true);
      m.set_requires_grad(true);
      mf::layers::AttentionInputs ink = in;
      if (k == 1 && !cross) ink.bias = one.wrap(mf::zeros({H, T, T}, DType::kF64));
      const mf::layers::Attention& a = k == 0 ? fused : eager;
      out[k] = a.forward(one.wrap(x), false, false, ink, cross ? one.wrap(m) : mf::global::GlobalTensor{}).local;
      mf::sum(mf::mul(out[k], randn({B, T, C}, 3))).backward();
      grads[k] = {x.grad()};
      if (cross) grads[k].push_back(m.grad());
      for (auto& [name, p] : (k == 0 ? fused_group : eager_group).named_parameters()) grads[k].push_back(p.grad());
    }
    expect_close(out[1], out[0].to_vector<double>(), 1e-12, 1e-12, "output");
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i)
      expect_close(grads[1][i], grads[0][i].to_vector<double>(), 1e-11, 1e-12, "grad");
  }
}
