// Parity of every op's CUDA kernels with the CPU implementation, forward and backward, in f32,
// bf16, f16 and f64, with the tolerances of parity.h (label `cuda`; skipped without a GPU).
#include "cuda/parity.h"

#include "meshflow/ops/registry.h"
#include "meshflow/optim/optimizer.h"
#include "meshflow/random/generator.h"

namespace mfc {
namespace {

using V = std::vector<Tensor>;

TEST(CudaParity, Transfer) {
  MF_REQUIRE_GPU();
  Tensor x = normal({3, 5, 7}, 1);
  Tensor g = mf::to(x, gpu());
  EXPECT_EQ(g.device(), gpu());
  EXPECT_EQ(values(g), values(x));  // bit-exact round trip
  Tensor back = mf::to(mf::transpose(g, 0, 2), host());
  EXPECT_EQ(values(back), values(mf::transpose(x, 0, 2)));
}

TEST(CudaParity, Binary) {
  MF_REQUIRE_GPU();
  Tensor a = normal({4, 1, 5}, 2), b = normal({1, 3, 5}, 3), pos = uniform({1, 3, 5}, 0.5, 2.0, 4);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("add", [](const V& x) { return mf::add(x[0], x[1]); }, {a, b}, dt);
    expect_parity("sub", [](const V& x) { return mf::sub(x[0], x[1]); }, {a, b}, dt);
    expect_parity("mul", [](const V& x) { return mf::mul(x[0], x[1]); }, {a, b}, dt);
    expect_parity("div", [](const V& x) { return mf::div(x[0], x[1]); }, {a, pos}, dt);
    // A strided (transposed) operand.
    expect_parity("add transposed", [](const V& x) { return mf::add(mf::transpose(x[0], 0, 1), x[1]); },
                  {normal({6, 4}, 5), normal({4, 6}, 6)}, dt);
  }
}

TEST(CudaParity, Unary) {
  MF_REQUIRE_GPU();
  Tensor x = normal({7, 33}, 7), pos = uniform({7, 33}, 0.1, 3.0, 8);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("neg", [](const V& v) { return mf::neg(v[0]); }, {x}, dt);
    expect_parity("scale", [](const V& v) { return mf::scale(v[0], -1.75); }, {x}, dt);
    expect_parity("add_scalar", [](const V& v) { return mf::add_scalar(v[0], 0.5); }, {x}, dt);
    expect_parity("exp", [](const V& v) { return mf::exp(v[0]); }, {x}, dt);
    expect_parity("log", [](const V& v) { return mf::log(v[0]); }, {pos}, dt);
    expect_parity("sqrt", [](const V& v) { return mf::sqrt(v[0]); }, {pos}, dt);
    expect_parity("gelu tanh", [](const V& v) { return mf::gelu(v[0], true); }, {x}, dt);
    expect_parity("gelu erf", [](const V& v) { return mf::gelu(v[0], false); }, {x}, dt);
    expect_parity("silu", [](const V& v) { return mf::silu(v[0]); }, {x}, dt);
    expect_parity("relu", [](const V& v) { return mf::relu(v[0]); }, {x}, dt);
    expect_parity("tanh", [](const V& v) { return mf::tanh(v[0]); }, {x}, dt);
  }
}

TEST(CudaParity, Reductions) {
  MF_REQUIRE_GPU();
  Tensor x = normal({5, 6, 7}, 9);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("sum all", [](const V& v) { return mf::sum(v[0]); }, {x}, dt);
    expect_parity("sum axis 1", [](const V& v) { return mf::sum(v[0], {1}); }, {x}, dt);
    expect_parity("mean axes 0,2", [](const V& v) { return mf::mean(v[0], {0, 2}, true); }, {x}, dt);
    expect_parity("max axis 2", [](const V& v) { return mf::max(v[0], 2); }, {x}, dt);
    expect_parity("sum_squares", [](const V& v) { return mf::sum_squares(v[0]); }, {x}, dt, forward_only());
    expect_parity("sum_to", [](const V& v) { return mf::sum_to(v[0], {1, 6, 1}); }, {x}, dt);
  }
}

TEST(CudaParity, ShapeAndCopy) {
  MF_REQUIRE_GPU();
  Tensor x = normal({3, 4, 5}, 10), y = normal({3, 2, 5}, 11);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("permute+contiguous", [](const V& v) { return mf::contiguous(mf::permute(v[0], {2, 0, 1})); },
                  {x}, dt);
    expect_parity("cat", [](const V& v) { return mf::cat({v[0], v[1]}, 1); }, {x, y}, dt);
    expect_parity("narrow", [](const V& v) { return mf::contiguous(mf::narrow(v[0], 2, 1, 3)); }, {x}, dt);
    expect_parity("expand", [](const V& v) { return mf::contiguous(mf::expand(v[0], {3, 4, 2, 5})); },
                  {normal({3, 4, 1, 5}, 12)}, dt);
    expect_parity("reshape of a view", [](const V& v) { return mf::reshape(mf::transpose(v[0], 0, 1), {4, 15}); },
                  {x}, dt);
  }
}

TEST(CudaParity, CastIsExactRounding) {
  MF_REQUIRE_GPU();
  // Values around every rounding boundary: the GPU must round exactly like core/half.h.
  Tensor x = mf::scale(normal({4096}, 13), 100.0);
  Tensor tiny = mf::scale(normal({1024}, 14), 1e-6);  // f16 subnormals
  for (DType to_dt : {DType::kBF16, DType::kF16, DType::kF64, DType::kI64}) {
    for (const Tensor& src : {x, tiny}) {
      Tensor cpu = mf::cast(src, to_dt);
      Tensor gpu_t = mf::cast(mf::to(src, gpu()), to_dt);
      EXPECT_EQ(values(gpu_t), values(cpu)) << "f32 -> " << name(to_dt);
      Tensor back_cpu = mf::cast(cpu, DType::kF32);
      Tensor back_gpu = mf::cast(gpu_t, DType::kF32);
      EXPECT_EQ(values(back_gpu), values(back_cpu)) << name(to_dt) << " -> f32";
    }
  }
}

TEST(CudaParity, InPlace) {
  MF_REQUIRE_GPU();
  mf::NoGradGuard ng;
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    Tensor a = mf::cast(normal({6, 8}, 15), dt), b = mf::cast(normal({8, 6}, 16), dt);
    Tensor ga = mf::to(a, gpu()), gb = mf::to(b, gpu());
    Tensor ca = mf::clone(a);
    mf::add_(ca, mf::transpose(b, 0, 1), -0.5);
    mf::add_(ga, mf::transpose(gb, 0, 1), -0.5);
    EXPECT_TRUE(close("add_", ga, ca, dt, tolerance(dt)));
    mf::scale_(ca, 3.0);
    mf::scale_(ga, 3.0);
    EXPECT_TRUE(close("scale_", ga, ca, dt, tolerance(dt)));
    Tensor cv = mf::narrow(ca, 1, 2, 3), gv = mf::narrow(ga, 1, 2, 3);
    mf::fill_(cv, 0.25);
    mf::fill_(gv, 0.25);
    EXPECT_TRUE(close("fill_ strided", ga, ca, dt, {0, 0}));
    mf::copy_(cv, mf::narrow(mf::transpose(b, 0, 1), 1, 0, 3));
    mf::copy_(gv, mf::narrow(mf::transpose(gb, 0, 1), 1, 0, 3));
    EXPECT_TRUE(close("copy_ strided", ga, ca, dt, tolerance(dt)));
  }
}

TEST(CudaParity, Indexing) {
  MF_REQUIRE_GPU();
  Tensor w = normal({50, 16}, 17);
  Tensor ids = int_ids({4, 9}, 50, 18);  // repeated ids: the backward sums them
  Tensor x = normal({6, 10, 3}, 19);
  Tensor idx = int_ids({7}, 10, 20);
  Tensor gidx = int_ids({6, 4, 3}, 10, 21);
  Tensor cond = bools({6, 10, 3}, 0.5, 22);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("embedding", [](const V& v) { return mf::embedding(v[0], v[1]); }, {w, ids}, dt);
    expect_parity("embedding i32", [](const V& v) { return mf::embedding(v[0], v[1]); },
                  {w, int_ids({4, 9}, 50, 23, DType::kI32)}, dt);
    expect_parity("index_select", [](const V& v) { return mf::index_select(v[0], 1, v[1]); }, {x, idx}, dt);
    expect_parity("gather", [](const V& v) { return mf::gather(v[0], 1, v[1]); }, {x, gidx}, dt);
    expect_parity("where", [](const V& v) { return mf::where(v[0], v[1], v[2]); }, {cond, x, normal({1, 10, 3}, 24)},
                  dt);
    expect_parity("masked_fill", [](const V& v) { return mf::masked_fill(v[0], v[1], -1e4); }, {x, cond}, dt);
  }
}

TEST(CudaParity, EmbeddingBackwardIsDeterministic) {
  MF_REQUIRE_GPU();
  Tensor w = mf::to(normal({1000, 64}, 25), gpu()).detach();
  w.set_requires_grad(true);
  Tensor ids = mf::to(int_ids({64, 128}, 20, 26), gpu());  // 20 distinct rows, ~400 uses each
  Tensor dy = mf::to(normal({64, 128, 64}, 27), gpu());
  std::vector<double> first;
  for (int run = 0; run < 3; ++run) {
    w.zero_grad();
    mf::embedding(w, ids).backward(dy);
    std::vector<double> g = values(w.grad());
    if (run == 0) first = g;
    else EXPECT_EQ(g, first) << "run " << run << " differs bit for bit";
  }
}

TEST(CudaParity, NormAndSoftmax) {
  MF_REQUIRE_GPU();
  for (int64_t c : {64, 768, 1000}) {
    Tensor x = normal({37, c}, 28), w = uniform({c}, 0.5, 1.5, 29), b = normal({c}, 30);
    for (DType dt : float_dtypes()) {
      SCOPED_TRACE(std::string(name(dt)) + " C=" + std::to_string(c));
      expect_parity("layer_norm", [](const V& v) { return mf::layer_norm(v[0], v[1], v[2]); }, {x, w, b}, dt);
      expect_parity("layer_norm no bias", [](const V& v) { return mf::layer_norm(v[0], v[1], Tensor()); },
                    {x, w}, dt);
      expect_parity("rms_norm", [](const V& v) { return mf::rms_norm(v[0], v[1]); }, {x, w}, dt);
      expect_parity("softmax", [](const V& v) { return mf::softmax(v[0]); }, {x}, dt);
      expect_parity("log_softmax", [](const V& v) { return mf::log_softmax(v[0]); }, {x}, dt);
    }
  }
}

TEST(CudaParity, DropoutDrawsTheCpuMask) {
  MF_REQUIRE_GPU();
  Tensor x = normal({8, 129}, 31);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    // The same seed and stream on both devices: the same mask (Philox by logical offset).
    expect_parity(
        "dropout",
        [](const V& v) {
          mf::Generator g(77);
          return mf::dropout(v[0], 0.3, true, &g);
        },
        {x}, dt);
    expect_parity(
        "dropout of a slice",
        [](const V& v) {
          mf::Generator g(78);
          return mf::dropout(v[0], 0.5, true, &g, mf::LogicalSlice{{16, 129}, {8, 0}});
        },
        {x}, dt);
  }
}

TEST(CudaParity, RandomFillDrawsTheCpuNumbers) {
  MF_REQUIRE_GPU();
  for (DType dt : {DType::kF32, DType::kF64}) {
    Tensor c = mf::empty({1001}, dt), g = mf::empty({1001}, dt, gpu());
    mf::Generator g1(5), g2(5);
    mf::normal_(c, 0.5, 2.0, &g1);
    mf::normal_(g, 0.5, 2.0, &g2);
    EXPECT_TRUE(close("normal_", g, c, dt, dt == DType::kF64 ? Tol{1e-12, 1e-12} : Tol{1e-6, 1e-6}));
    mf::uniform_(c, -1.0, 3.0, &g1);
    mf::uniform_(g, -1.0, 3.0, &g2);
    EXPECT_TRUE(close("uniform_", g, c, dt, {0, 0}));
  }
}

// q/k/v as strided views of one fused (B, T, 3, H, D) projection, as the model passes them.
V qkv_views(const Tensor& qkv) {
  auto parts = mf::chunk(qkv, 3, 2);  // (B, T, 1, H, D) each
  V out;
  for (auto& p : parts) out.push_back(mf::permute(mf::squeeze(p, 2), {0, 2, 1, 3}));
  return out;
}

TEST(CudaParity, Attention) {
  MF_REQUIRE_GPU();
  struct Case {
    int64_t b, h, t, d;
    bool causal, mask;
    double dropout;
  };
  for (Case cs : {Case{2, 3, 17, 64, true, false, 0.0}, Case{2, 2, 64, 64, true, false, 0.1},
                  Case{1, 4, 130, 32, false, true, 0.0}, Case{2, 2, 33, 128, true, true, 0.2},
                  Case{1, 2, 257, 64, true, false, 0.0}}) {
    Tensor qkv = normal({cs.b, cs.t, 3, cs.h, cs.d}, 40);
    Tensor mask = cs.mask ? bools({cs.b, cs.t}, 0.2, 41) : Tensor();
    for (DType dt : float_dtypes()) {
      SCOPED_TRACE(std::string(name(dt)) + " T=" + std::to_string(cs.t) + " D=" + std::to_string(cs.d) +
                   (cs.causal ? " causal" : "") + (cs.mask ? " mask" : "") + " p=" + std::to_string(cs.dropout));
      expect_parity(
          "sdpa",
          [cs](const V& v) {
            V q = qkv_views(v[0]);
            mf::Generator g(99);
            mf::AttentionOptions o;
            o.causal = cs.causal;
            o.dropout_p = cs.dropout;
            o.gen = &g;
            if (v[1].defined()) o.key_padding_mask = v[1];
            return mf::scaled_dot_product_attention(q[0], q[1], q[2], o);
          },
          {qkv, mask}, dt);
    }
  }
}

TEST(CudaParity, CrossEntropy) {
  MF_REQUIRE_GPU();
  Tensor logits = normal({64, 1003}, 50, 3.0);
  std::vector<int64_t> t(64);
  for (int i = 0; i < 64; ++i) t[i] = (i * 37) % 1003;
  t[5] = -100;
  t[17] = -100;
  Tensor targets = mf::from_vector(t, {64});
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("cross_entropy", [](const V& v) { return mf::cross_entropy(v[0], v[1]); }, {logits, targets}, dt);
    expect_parity("cross_entropy smoothing",
                  [](const V& v) { return mf::cross_entropy(v[0], v[1], -100, 0.1); }, {logits, targets}, dt);
  }
}

TEST(CudaParity, Rope) {
  MF_REQUIRE_GPU();
  Tensor x = normal({2, 3, 19, 16}, 60);
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    expect_parity("rope", [](const V& v) { return mf::rope(v[0], 10000.0, 5); }, {x}, dt);
  }
}

TEST(CudaParity, Matmul) {
  MF_REQUIRE_GPU();
  for (DType dt : float_dtypes()) {
    SCOPED_TRACE(name(dt));
    Tol t = tolerance(dt);
    if (dt == DType::kF32) t = {2e-4, 2e-5};  // K up to 768: a longer sum in another order
    ParityOptions o = with_tol(t);
    expect_parity("matmul", [](const V& v) { return mf::matmul(v[0], v[1]); }, {normal({33, 70}, 70), normal({70, 45}, 71)},
                  dt, o);
    expect_parity("matmul batched, transposed operands",
                  [](const V& v) { return mf::matmul(mf::transpose(v[0], 1, 2), mf::transpose(v[1], 1, 2)); },
                  {normal({3, 70, 33}, 72), normal({3, 45, 70}, 73)}, dt, o);
    expect_parity("linear + bias", [](const V& v) { return mf::linear(v[0], v[1], v[2]); },
                  {normal({4, 9, 768}, 74), normal({96, 768}, 75, 0.05), normal({96}, 76)}, dt, o);
    expect_parity("affine (Conv1D) + bias", [](const V& v) { return mf::affine(v[0], v[1], v[2]); },
                  {normal({4, 9, 64}, 77), normal({64, 96}, 78, 0.1), normal({96}, 79)}, dt, o);
    expect_parity("linear no bias", [](const V& v) { return mf::linear(v[0], v[1]); },
                  {normal({17, 64}, 80), normal({50, 64}, 81, 0.1)}, dt, o);
  }
}

TEST(CudaParity, OptimizerUpdates) {
  MF_REQUIRE_GPU();
  mf::NoGradGuard ng;
  for (DType dt : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(name(dt));
    Tensor p = mf::cast(normal({1000}, 90), dt), g = mf::cast(normal({1000}, 91), dt);
    Tensor m = mf::zeros({1000}, dt), v = mf::zeros({1000}, dt), buf = mf::zeros({1000}, dt);
    Tensor gp = mf::to(p, gpu()), gg = mf::to(g, gpu()), gm = mf::to(m, gpu()), gv = mf::to(v, gpu());
    Tensor gbuf = mf::to(buf, gpu());
    for (int64_t step = 1; step <= 3; ++step) {
      mf::adamw_update_(p, g, m, v, 1e-2, 0.9, 0.95, 1e-8, 0.1, step);
      mf::adamw_update_(gp, gg, gm, gv, 1e-2, 0.9, 0.95, 1e-8, 0.1, step);
    }
    EXPECT_TRUE(close("adamw param", gp, p, dt, tolerance(dt)));
    EXPECT_TRUE(close("adamw exp_avg_sq", gv, v, dt, tolerance(dt)));
    mf::sgd_update_(p, g, buf, 0.1, 0.9, 0.01);
    mf::sgd_update_(gp, gg, gbuf, 0.1, 0.9, 0.01);
    EXPECT_TRUE(close("sgd param", gp, p, dt, tolerance(dt)));
  }
}

}  // namespace
}  // namespace mfc
