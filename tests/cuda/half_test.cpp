// Native bf16/f16 on the GPU (nn/mixed_precision.h, "Dtypes" in docs/architecture/engine.md):
// each op run on half tensors on the GPU against the CPU's simulation of it (the f32 op on the same
// rounded inputs, its result rounded once to the op's output dtype), forward and backward; the
// output dtypes (half outputs, f32 statistics and loss); index and target checks on device
// tensors; and the tiny bf16 GPT-2 on the GPU against the same model on the CPU. Every test
// skips, with a message, where no GPU is visible or the kernels it needs are not registered.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meshflow/models/gpt2/model.h"
#include "meshflow/nn/mixed_precision.h"
#include "meshflow/ops/registry.h"
#include "testing.h"

namespace {
using namespace mft;

const mf::Device kGpu = mf::cuda_device(0);
const mf::Device kCpu = mf::cpu_device();

// Skips unless a GPU is visible and every kernel named is registered for (cuda, dt).
#define MFT_REQUIRE_CUDA_KERNELS(dt, ...)                                                            \
  do {                                                                                               \
    if (mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";                      \
    for (const char* k : {__VA_ARGS__})                                                              \
      if (!mf::kernel_registry().has(k, mf::DeviceType::kCUDA, dt))                                  \
        GTEST_SKIP() << "no cuda " << mf::dtype_name(dt) << " kernel '" << k << "' registered";      \
  } while (0)

// Values of t on the host as f64.
std::vector<double> host_values(const Tensor& t) {
  return mf::cast(mf::to(t.detach(), kCpu), DType::kF64).to_vector<double>();
}

// max |got - want| <= tol * max |want| + atol, elementwise over the whole tensor; the shapes equal.
void expect_close(const Tensor& got, const Tensor& want, double tol, double atol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.shape(), want.shape()) << what << ": " << got.str() << " vs " << want.str();
  std::vector<double> g = host_values(got), w = host_values(want);
  double max_want = 0.0, max_err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    max_want = std::max(max_want, std::abs(w[i]));
    const double err = std::isfinite(g[i]) ? std::abs(g[i] - w[i]) : INFINITY;
    if (err > max_err) max_err = err, worst = i;
  }
  EXPECT_LE(max_err, tol * max_want + atol) << what << ": worst element " << worst << " got " << g[worst] << " want "
                                            << w[worst] << " (max |want| " << max_want << ")";
}

// A few units in the last place of the half type, relative to a tensor's largest element.
double tol_for(DType dt) { return dt == DType::kBF16 ? 1.0 / 64 : 1.0 / 512; }

// One op, two ways: `fn` on the GPU with half inputs (native kernels) and on the CPU with their
// f32 values. Float inputs are rounded to `dt` first (both sides see the same values); index
// inputs pass unchanged (the GPU side gets them on the GPU when `index_on_gpu`). Compares the
// outputs (the CPU's rounded to each GPU output's dtype, which must be `out_dtypes`), then,
// from a random upstream gradient of the first output, the gradients of the inputs marked in
// `grad` (which must have the inputs' half dtype).
using OpFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
void check_native(const std::string& name, DType dt, const std::vector<Tensor>& inputs32, const std::vector<bool>& grad,
                  const std::vector<DType>& out_dtypes, const OpFn& fn, double tol, bool index_on_gpu = true) {
  SCOPED_TRACE(name + " " + mf::dtype_name(dt));
  std::vector<Tensor> ref, dev;
  for (size_t i = 0; i < inputs32.size(); ++i) {
    const Tensor& x = inputs32[i];
    if (!mf::is_floating(x.dtype())) {
      ref.push_back(x);
      dev.push_back(index_on_gpu ? mf::to(x, kGpu) : x);
      continue;
    }
    Tensor h = mf::cast(x, dt);  // the values both sides compute on
    Tensor r = mf::cast(h, DType::kF32);
    Tensor d = mf::to(h, kGpu);
    if (grad[i]) {
      r.set_requires_grad(true);
      d.set_requires_grad(true);
    }
    ref.push_back(r);
    dev.push_back(d);
  }
  std::vector<Tensor> out_ref = fn(ref), out_dev = fn(dev);
  ASSERT_EQ(out_ref.size(), out_dev.size());
  ASSERT_EQ(out_dev.size(), out_dtypes.size());
  for (size_t i = 0; i < out_dev.size(); ++i) {
    EXPECT_EQ(out_dev[i].device(), kGpu) << "output " << i;
    EXPECT_EQ(out_dev[i].dtype(), out_dtypes[i]) << "output " << i << " " << out_dev[i].str();
    expect_close(out_dev[i], mf::cast(out_ref[i], out_dev[i].dtype()), tol, 1e-6, "output " + std::to_string(i));
  }
  bool any_grad = false;
  for (bool g : grad) any_grad = any_grad || g;
  if (!any_grad) return;
  Tensor up = mf::cast(randn(out_dev[0].shape(), 77, DType::kF32), out_dev[0].dtype());  // the rounded upstream
  out_ref[0].backward(mf::cast(up, out_ref[0].dtype()));
  out_dev[0].backward(mf::to(up, kGpu));
  for (size_t i = 0; i < inputs32.size(); ++i) {
    if (!grad[i]) continue;
    Tensor gd = dev[i].grad(), gr = ref[i].grad();
    ASSERT_TRUE(gd.defined() && gr.defined()) << "gradient of input " << i;
    EXPECT_EQ(gd.dtype(), dt) << "gradient of input " << i;
    EXPECT_EQ(gd.device(), kGpu) << "gradient of input " << i;
    // Gradients have the half dtype: never a tighter bound than a few of its ulps.
    expect_close(gd, mf::cast(gr, dt), std::max(tol, tol_for(dt)), 1e-6, "gradient of input " + std::to_string(i));
  }
}

class CudaHalf : public ::testing::TestWithParam<DType> {};

TEST_P(CudaHalf, NativeHalfCoversTheModel) {
  if (mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  EXPECT_TRUE(mf::native_half(kGpu, GetParam()))
      << "a kernel of the model is missing for cuda " << mf::dtype_name(GetParam()) << " (ops/native_half.cpp)";
  EXPECT_FALSE(mf::native_half(kCpu, GetParam()));
  EXPECT_FALSE(mf::native_half(kGpu, DType::kF32));
}

TEST_P(CudaHalf, Elementwise) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "binary", "unary", "activation_backward", "reduce", "copy", "cast");
  Tensor a = randn({5, 7, 33}, 1, DType::kF32), b = randn({7, 33}, 2, DType::kF32);
  const double t = tol_for(dt);
  check_native("add broadcast", dt, {a, b}, {true, true}, {dt}, [](auto& in) { return std::vector{mf::add(in[0], in[1])}; }, t);
  check_native("mul broadcast", dt, {a, b}, {true, true}, {dt}, [](auto& in) { return std::vector{mf::mul(in[0], in[1])}; }, t);
  check_native("sub", dt, {a, a}, {true, false}, {dt}, [](auto& in) { return std::vector{mf::sub(in[0], in[1])}; }, t);
  check_native("gelu", dt, {a}, {true}, {dt}, [](auto& in) { return std::vector{mf::gelu(in[0], true)}; }, t);
  check_native("scale", dt, {a}, {true}, {dt}, [](auto& in) { return std::vector{mf::scale(in[0], 0.37)}; }, t);
}

TEST_P(CudaHalf, Reductions) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "reduce", "copy", "cast", "unary");
  Tensor x = randn({6, 9, 40}, 3, DType::kF32);
  const double t = tol_for(dt);
  check_native("sum axis 0", dt, {x}, {true}, {dt}, [](auto& in) { return std::vector{mf::sum(in[0], {0})}; }, t);
  check_native("sum axes 0,1", dt, {x}, {true}, {dt}, [](auto& in) { return std::vector{mf::sum(in[0], {0, 1})}; }, t);
  check_native("mean last", dt, {x}, {true}, {dt}, [](auto& in) { return std::vector{mf::mean(in[0], {-1})}; }, t);
  // sum_squares: f32 for half inputs, on every device.
  Tensor h = mf::cast(x, dt);
  Tensor ss = mf::sum_squares(mf::to(h, kGpu));
  EXPECT_EQ(ss.dtype(), DType::kF32);
  EXPECT_NEAR(ss.item(), mf::sum_squares(h).item(), 1e-5 * mf::sum_squares(h).item());
}

TEST_P(CudaHalf, InPlaceAndZeros) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "add_inplace", "unary", "fill", "copy", "cast");
  Tensor a = mf::cast(randn({1000}, 4, DType::kF32), dt), b = mf::cast(randn({1000}, 5, DType::kF32), dt);
  Tensor da = mf::to(a, kGpu), db = mf::to(b, kGpu);
  mf::add_(da, db, 0.5);
  mf::add_(a, b, 0.5);  // the CPU: widened, rounded once — the same arithmetic
  expect_close(da, a, 1.0 / 256, 0.0, "add_");
  mf::scale_(da, -3.0);
  mf::scale_(a, -3.0);
  expect_close(da, a, 1.0 / 256, 0.0, "scale_");
  Tensor z = mf::zeros({3, 5}, dt, kGpu);
  for (double v : host_values(z)) ASSERT_EQ(v, 0.0);
  Tensor host_src = mf::cast(randn({3, 5}, 6, DType::kF32), dt);
  mf::copy_(z, host_src);  // across devices
  expect_close(z, host_src, 0.0, 0.0, "copy_ from the host");
}

TEST_P(CudaHalf, LinearAndMatmul) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "gemm", "reduce", "copy", "cast");
  Tensor x = randn({4, 13, 64}, 7, DType::kF32), w = randn({96, 64}, 8, DType::kF32), bias = randn({96}, 9, DType::kF32);
  Tensor wa = randn({64, 96}, 10, DType::kF32);
  const double t = tol_for(dt);
  check_native("linear", dt, {x, w, bias}, {true, true, true}, {dt},
               [](auto& in) { return std::vector{mf::linear(in[0], in[1], in[2])}; }, t);
  check_native("affine", dt, {x, wa, bias}, {true, true, true}, {dt},
               [](auto& in) { return std::vector{mf::affine(in[0], in[1], in[2])}; }, t);
  Tensor a = randn({3, 17, 40}, 11, DType::kF32), b = randn({3, 40, 24}, 12, DType::kF32);
  check_native("batched matmul", dt, {a, b}, {true, true}, {dt}, [](auto& in) { return std::vector{mf::matmul(in[0], in[1])}; }, t);
}

TEST_P(CudaHalf, LayerNormAndSoftmax) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "layer_norm", "layer_norm_backward");
  Tensor x = randn({2, 19, 96}, 13, DType::kF32), w = randn({96}, 14, DType::kF32), b = randn({96}, 15, DType::kF32);
  const double t = tol_for(dt);
  check_native("layer_norm", dt, {x, w, b}, {true, true, true}, {dt},
               [](auto& in) { return std::vector{mf::layer_norm(in[0], in[1], in[2])}; }, t);
  if (mf::kernel_registry().has("softmax", mf::DeviceType::kCUDA, dt) &&
      mf::kernel_registry().has("softmax_backward", mf::DeviceType::kCUDA, dt)) {
    check_native("softmax", dt, {x}, {true}, {dt}, [](auto& in) { return std::vector{mf::softmax(in[0])}; }, t);
    check_native("log_softmax", dt, {x}, {true}, {dt}, [](auto& in) { return std::vector{mf::log_softmax(in[0])}; }, t);
  }
}

TEST_P(CudaHalf, Attention) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "attention_forward", "attention_backward", "copy");
  // q, k, v as views of one (B, T, 3, H, D) projection, as GPT-2 passes them.
  const int64_t B = 2, T = 37, H = 3, D = 64;
  Tensor qkv = randn({B, T, 3, H, D}, 16, DType::kF32);
  mf::AttentionOptions o;
  o.causal = true;
  auto fn = [&](const std::vector<Tensor>& in) {
    auto head = [&](int64_t i) { return mf::permute(mf::squeeze(mf::narrow(in[0], 2, i, 1), 2), {0, 2, 1, 3}); };
    return std::vector{mf::scaled_dot_product_attention(head(0), head(1), head(2), o)};
  };
  // Probabilities may enter the tensor cores rounded to the half type: a looser bound.
  check_native("causal attention", dt, {qkv}, {true}, {dt}, fn, 2 * tol_for(dt));
}

TEST_P(CudaHalf, CrossEntropy) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "cross_entropy_forward", "cross_entropy_backward");
  const int64_t N = 45, V = 1031;
  Tensor logits = randn({N, V}, 17, DType::kF32);
  std::vector<int64_t> tv;
  for (int64_t i = 0; i < N; ++i) tv.push_back(i % 7 == 3 ? -100 : (i * 131 + 5) % V);
  Tensor targets = mf::from_vector(tv, {N});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector{mf::cross_entropy(in[0], in[1])}; };
  // The loss is f32 (computed in f32 from the stored logits); its gradient has the logits' dtype.
  check_native("targets on the GPU", dt, {logits, targets}, {true, false}, {DType::kF32}, fn, 1e-5, true);
  check_native("targets on the host", dt, {logits, targets}, {true, false}, {DType::kF32}, fn, 1e-5, false);
  auto smooth = [](const std::vector<Tensor>& in) { return std::vector{mf::cross_entropy(in[0], in[1], -100, 0.1)}; };
  check_native("label smoothing", dt, {logits, targets}, {true, false}, {DType::kF32}, smooth, 1e-5, true);
  // i32 targets on the GPU; a target out of range is caught on the host copy.
  Tensor bad = mf::cast(targets, DType::kI32);
  mf::NoGradGuard ng;
  Tensor dl = mf::to(mf::cast(logits, dt), kGpu);
  EXPECT_NO_THROW(mf::cross_entropy(dl, mf::to(bad, kGpu)));
  std::vector<int64_t> tb = tv;
  tb[11] = V;
  MFT_EXPECT_ERROR(mf::cross_entropy(dl, mf::to(mf::from_vector(tb, {N}), kGpu)), "cross_entropy", "out of range");
}

TEST_P(CudaHalf, EmbeddingAndIndexChecks) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "index_select", "index_add", "fill");
  Tensor w = randn({50, 24}, 18, DType::kF32);
  std::vector<int64_t> iv;
  for (int i = 0; i < 3 * 11; ++i) iv.push_back((i * 17 + 2) % 50);
  iv[5] = iv[6] = iv[30] = 9;  // repeated ids: the backward sums them
  Tensor ids = mf::from_vector(iv, {3, 11});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector{mf::embedding(in[0], in[1])}; };
  check_native("ids on the GPU", dt, {w, ids}, {true, false}, {dt}, fn, tol_for(dt), true);
  check_native("ids on the host", dt, {w, ids}, {true, false}, {dt}, fn, tol_for(dt), false);
  check_native("i32 ids on the GPU", dt, {w, mf::cast(ids, DType::kI32)}, {true, false}, {dt}, fn, tol_for(dt), true);
  Tensor dw = mf::to(mf::cast(w, dt), kGpu);
  std::vector<int64_t> bad = iv;
  bad[7] = 50;
  MFT_EXPECT_ERROR(mf::embedding(dw, mf::to(mf::from_vector(bad, {3, 11}), kGpu)), "embedding", "out of range [0, 50)");
  bad[7] = -1;
  MFT_EXPECT_ERROR(mf::embedding(dw, mf::from_vector(bad, {3, 11})), "embedding", "out of range [0, 50)");
}

TEST_P(CudaHalf, Dropout) {
  const DType dt = GetParam();
  MFT_REQUIRE_CUDA_KERNELS(dt, "dropout");
  Tensor x = randn({4, 33, 20}, 19, DType::kF32);
  // Same generator state both sides: the same mask (Philox by logical position).
  auto fn = [](const std::vector<Tensor>& in) {
    mf::Generator g(1234);
    return std::vector{mf::dropout(in[0], 0.25, true, &g)};
  };
  check_native("dropout", dt, {x}, {true}, {dt}, fn, tol_for(dt));
}

TEST_P(CudaHalf, MixedPrecisionHelpers) {
  const DType dt = GetParam();
  if (mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (!mf::native_half(kGpu, dt)) GTEST_SKIP() << "the model's cuda " << mf::dtype_name(dt) << " kernels are incomplete";
  Tensor p = mf::to(mf::cast(randn({4, 6}, 20, DType::kF32), dt), kGpu);
  EXPECT_EQ(mf::nn::compute(p).impl(), p.impl());  // used as stored
  EXPECT_EQ(mf::nn::round_to(p, dt).impl(), p.impl());
  Tensor f = mf::to(randn({4, 6}, 21, DType::kF32), kGpu);
  EXPECT_EQ(mf::nn::round_to(f, dt).dtype(), dt);
  // The CPU keeps simulating: an f32 copy of the weight, activations rounded and kept f32.
  Tensor hp = mf::cast(randn({4, 6}, 20, DType::kF32), dt);
  EXPECT_EQ(mf::nn::compute(hp).dtype(), DType::kF32);
  EXPECT_EQ(mf::nn::round_to(randn({2}, 1, DType::kF32), dt).dtype(), DType::kF32);
}

// The tiny GPT-2 stored in bf16/f16: natively on the GPU against the CPU's simulation from the
// same weights (no dropout): the loss within 1%, each gradient within 5% of its norm. The GPU's
// activations are bf16/f16 tensors, the CPU's f32 ones rounded at the same places, so only the
// f32 accumulation order (and the flash attention's rounding of probabilities) differ.
TEST_P(CudaHalf, TinyGptMatchesCpuSimulation) {
  const DType dt = GetParam();
  if (mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (!mf::native_half(kGpu, dt)) GTEST_SKIP() << "the model's cuda " << mf::dtype_name(dt) << " kernels are incomplete";
  mf::models::Gpt2Config c;
  c.vocab_size = 97;
  c.max_seq_length = 32;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_attention_heads = 2;
  c.head_chunk_elements = 16 * 97;  // several loss chunks
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  c.dtype = dt;
  mf::models::Gpt2Model cpu(c), gpu(c);
  cpu.init_weights(11);
  gpu.init_weights(11);
  gpu.to_device(kGpu);
  EXPECT_EQ(c.activation_dtype(kGpu), dt);
  EXPECT_EQ(c.activation_dtype(kCpu), DType::kF32);
  std::vector<int64_t> ids, labels;
  for (int i = 0; i < 3 * 32; ++i) {
    ids.push_back((i * 7 + 3) % 97);
    labels.push_back(i % 11 == 0 ? -100 : (i * 5 + 1) % 97);
  }
  Tensor id = mf::from_vector(ids, {3, 32}), lb = mf::from_vector(labels, {3, 32});
  for (bool on_gpu : {false, true}) {
    SCOPED_TRACE(on_gpu ? "ids and labels on the GPU" : "ids and labels on the host");
    for (auto* m : {&cpu, &gpu})
      for (auto& [n, p] : m->named_parameters()) p.zero_grad();
    Tensor l_cpu = cpu.loss(id, lb);
    Tensor l_gpu = gpu.loss(on_gpu ? mf::to(id, kGpu) : id, on_gpu ? mf::to(lb, kGpu) : lb);
    EXPECT_EQ(l_gpu.dtype(), DType::kF32);
    EXPECT_EQ(l_gpu.device(), kGpu);
    EXPECT_NEAR(l_gpu.item(), l_cpu.item(), 1e-2 * l_cpu.item());
    l_cpu.backward();
    l_gpu.backward();
    auto a = gpu.named_parameters(), b = cpu.named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor g = a[i].second.grad(), r = b[i].second.grad();
      ASSERT_TRUE(g.defined()) << a[i].first;
      EXPECT_EQ(g.dtype(), dt) << a[i].first;
      EXPECT_EQ(g.device(), kGpu) << a[i].first;
      const double err = std::sqrt(
          mf::sum_squares(mf::sub(mf::cast(mf::to(g, kCpu), DType::kF64), mf::cast(r, DType::kF64))).item());
      const double norm = std::sqrt(mf::sum_squares(mf::cast(r, DType::kF64)).item());
      EXPECT_LE(err, 5e-2 * norm + 1e-3) << a[i].first << ": |g - ref| " << err << " vs |ref| " << norm;
    }
  }
  Tensor logits = gpu.logits(id);
  EXPECT_EQ(logits.dtype(), dt);  // the head's logits stay half
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaHalf, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(mf::dtype_name(info.param)); });

}  // namespace
