// CUDA kernels of the basic families (elementwise, copy, reduce, index, softmax, random, rope,
// optim) against the CPU kernels: the same inputs on both devices, results compared bit for bit
// where the CUDA kernel promises it, else to a tolerance. Kernels are called through the
// registry, so these tests need only the kernels and to(). Skipped without a GPU.
#include <cstring>
#include <iostream>

#include "meshflow/ops/kernels.h"
#include "meshflow/ops/registry.h"
#include "testing.h"

namespace {
using namespace mft;
using mf::Device;
namespace kn = mf::kernels;

#define MFT_NEED_GPU() \
  if (mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

Device gpu_dev() { return mf::cuda_device(0); }
Tensor gpu(const Tensor& t) { return mf::to(t, gpu_dev()); }
Tensor host(const Tensor& t) { return mf::contiguous(mf::to(t, mf::cpu_device())); }

template <class Fn>
Fn* cpu_k(const char* op, DType dt) {
  return mf::kernel<Fn>(op, mf::cpu_device(), dt);
}
template <class Fn>
Fn* gpu_k(const char* op, DType dt) {
  return mf::kernel<Fn>(op, gpu_dev(), dt);
}

// Byte-for-byte equality of a (GPU or CPU) tensor with a CPU reference of the same dtype/shape
// (any two NaNs count as equal).
void expect_same_bytes(const Tensor& got, const Tensor& ref, const std::string& what) {
  Tensor g = host(got), r = mf::contiguous(ref);
  ASSERT_EQ(g.dtype(), r.dtype()) << what;
  ASSERT_EQ(g.shape(), r.shape()) << what;
  const size_t esz = mf::dtype_nbytes(g.dtype());
  const auto* gp = static_cast<const unsigned char*>(g.raw_data());
  const auto* rp = static_cast<const unsigned char*>(r.raw_data());
  int failures = 0;
  for (int64_t i = 0; i < g.numel() && failures < 5; ++i)
    if (std::memcmp(gp + i * esz, rp + i * esz, esz) != 0) {
      std::vector<double> gv = to_f64(mf::narrow(mf::reshape(g, {-1}), 0, i, 1));
      std::vector<double> rv = to_f64(mf::narrow(mf::reshape(r, {-1}), 0, i, 1));
      if (std::isnan(gv[0]) && std::isnan(rv[0])) continue;  // NaN payloads may differ (f32 <-> f64)
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " gpu " << gv[0] << " cpu " << rv[0];
    }
}
void expect_near(const Tensor& got, const Tensor& ref, double rtol, double atol, const std::string& what) {
  expect_close(host(got), to_f64(ref), rtol, atol, what);
}

const DType kFloatTypes[] = {DType::kF32, DType::kF64};

TEST(CudaBasic, BinaryBroadcastAndStrided) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    Tensor a = randn({4, 3, 70}, 1, dt), b = mf::add_scalar(rand_uniform({3, 1}, 1.0, 2.0, 2, dt), 0.0);
    for (auto op : {mf::add, mf::sub, mf::mul, mf::div}) {
      expect_same_bytes(op(gpu(a), gpu(b)), op(a, b), "binary broadcast");
      Tensor nc = non_contiguous(a);
      Tensor gnc = mf::transpose(mf::contiguous(mf::transpose(gpu(a), 0, -1)), 0, -1);
      expect_same_bytes(op(gnc, gpu(b)), op(nc, b), "binary strided");
    }
  }
}

TEST(CudaBasic, UnaryAndActivations) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    const double tol = dt == DType::kF64 ? 1e-14 : 2e-6;
    Tensor x = mf::scale(randn({1000, 37}, 3, dt), 3.0), pos = rand_uniform({1000, 37}, 0.1, 5.0, 4, dt);
    Tensor gx = gpu(x), gpos = gpu(pos);
    expect_same_bytes(mf::neg(gx), mf::neg(x), "neg");
    expect_same_bytes(mf::scale(gx, -1.7), mf::scale(x, -1.7), "scale");
    expect_same_bytes(mf::add_scalar(gx, 0.3), mf::add_scalar(x, 0.3), "add_scalar");
    expect_same_bytes(mf::sqrt(gpos), mf::sqrt(pos), "sqrt");
    expect_same_bytes(mf::relu(gx), mf::relu(x), "relu");
    expect_near(mf::exp(gx), mf::exp(x), tol, 0, "exp");
    expect_near(mf::log(gpos), mf::log(pos), tol, tol, "log");
    expect_near(mf::gelu(gx, true), mf::gelu(x, true), tol, tol, "gelu tanh");
    expect_near(mf::gelu(gx, false), mf::gelu(x, false), tol, tol, "gelu erf");
    expect_near(mf::silu(gx), mf::silu(x), tol, tol, "silu");
    Tensor dy = randn({1000, 37}, 5, dt), gdy = gpu(dy);
    expect_near(mf::gelu_backward(gdy, gx, true), mf::gelu_backward(dy, x, true), tol, tol, "gelu tanh backward");
    expect_near(mf::gelu_backward(gdy, gx, false), mf::gelu_backward(dy, x, false), tol, tol, "gelu erf backward");
    expect_near(mf::silu_backward(gdy, gx), mf::silu_backward(dy, x), tol, tol, "silu backward");
    expect_same_bytes(mf::relu_backward(gdy, gx), mf::relu_backward(dy, x), "relu backward");
  }
}

TEST(CudaBasic, CastAllPairsBitExact) {
  MFT_NEED_GPU();
  // Values that exercise rounding ties, subnormals, overflow of f16, signed zeros, inf/NaN
  // (non-finite values only between floating types: their integer conversion is undefined).
  // Values beyond f16's range (inf in f16) only between floating types as well.
  std::vector<double> finite = {0.0, -0.0, 1.0, -1.5, 2.5, 3.00390625, 1.0 + 1.0 / 256, 1.0 + 3.0 / 512, 65504.0, 65519.0,
                                -7.0, 5.960464477539063e-08, 2.9802322387695312e-08, 1e-40, 0.1, -0.7, 1e-5};
  std::vector<double> special = finite;
  for (double v : {65520.0, 1e6, 123456.789, 1e39, static_cast<double>(INFINITY), -static_cast<double>(INFINITY),
                   static_cast<double>(NAN)})
    special.push_back(v);
  const DType all[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kBool};
  auto is_float = [](DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kBF16 || d == DType::kF16; };
  for (DType s : all)
    for (DType d : all) {
      const std::vector<double>& vals = is_float(s) && is_float(d) ? special : finite;
      Tensor src = mf::cast(mf::from_vector(vals, {static_cast<int64_t>(vals.size())}), s);
      Tensor ref = mf::empty(src.shape(), d);
      cpu_k<kn::Cast>("cast", s)(src, ref);
      Tensor gsrc = gpu(src), got = mf::empty(src.shape(), d, gpu_dev());
      gpu_k<kn::Cast>("cast", s)(gsrc, got);
      expect_same_bytes(got, ref, std::string("cast ") + mf::dtype_name(s) + " -> " + mf::dtype_name(d));
    }
  // Large contiguous casts (the vectorised path) f32 <-> bf16 / f16.
  Tensor big = mf::scale(randn({1 << 20}, 6, DType::kF32), 100.0);
  for (DType h : {DType::kBF16, DType::kF16}) {
    Tensor ref = mf::cast(big, h);
    Tensor got = mf::cast(gpu(big), h);
    expect_same_bytes(got, ref, "cast big f32 -> half");
    expect_same_bytes(mf::cast(got, DType::kF32), mf::cast(ref, DType::kF32), "cast big half -> f32");
  }
}

TEST(CudaBasic, CopyFillAddInplaceWhere) {
  MFT_NEED_GPU();
  for (DType dt : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    Tensor x = mf::cast(mf::scale(randn({5, 7, 9}, 7), 10.0), dt);
    Tensor gx = gpu(x);
    // strided -> contiguous and strided -> strided
    expect_same_bytes(mf::contiguous(mf::permute(gx, {2, 0, 1})), mf::contiguous(mf::permute(x, {2, 0, 1})),
                      "copy permute");
    Tensor dst = mf::zeros({9, 5, 7}, dt), gdst = gpu(dst);
    Tensor dview = mf::permute(dst, {1, 2, 0}), gview = mf::permute(gdst, {1, 2, 0});
    mf::copy_(dview, mf::transpose(mf::transpose(x, 0, 1), 0, 1));
    mf::copy_(gview, gx);
    expect_same_bytes(gdst, dst, "copy_ into strided");
    Tensor f = mf::empty({3, 1000}, dt), gf = mf::empty({3, 1000}, dt, gpu_dev());
    for (double v : {0.0, -2.5, 1.0 / 3.0}) {
      mf::fill_(f, v);
      mf::fill_(gf, v);
      expect_same_bytes(gf, f, "fill");
      Tensor fs = mf::narrow(f, 1, 3, 500), gfs = mf::narrow(gf, 1, 3, 500);
      mf::fill_(fs, v + 1);
      mf::fill_(gfs, v + 1);
      expect_same_bytes(gf, f, "fill strided");
    }
  }
  for (DType dt : kFloatTypes) {
    Tensor d = randn({3001}, 8, dt), s = randn({3001}, 9, dt);
    Tensor gd = gpu(d);
    mf::add_(d, s, 0.37);
    mf::add_(gd, gpu(s), 0.37);
    expect_near(gd, d, dt == DType::kF64 ? 1e-15 : 1e-7, 1e-15, "add_");  // FMA or not, as compiled
    Tensor c = mf::cast(mf::relu(rand_uniform({4, 1, 33}, -1, 1, 10)), DType::kBool);  // about half true
    Tensor a = randn({4, 5, 33}, 11, dt), b = randn({1, 5, 1}, 12, dt);
    expect_same_bytes(mf::where(gpu(c), gpu(a), gpu(b)), mf::where(c, a, b), "where");
  }
}

TEST(CudaBasic, ReduceSumMaxSumSquares) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    const double tol = dt == DType::kF64 ? 1e-13 : 1e-6;
    for (Shape s : {Shape{7, 300, 5}, Shape{2, 200000}, Shape{70000, 3}, Shape{16384, 768}, Shape{1, 1, 1}}) {
      Tensor x = randn(s, 13, dt), gx = gpu(x);
      for (int64_t ax = 0; ax < static_cast<int64_t>(s.size()); ++ax) {
        expect_near(mf::sum(gx, {ax}), mf::sum(x, {ax}), tol, tol, "sum axis " + std::to_string(ax));
        expect_same_bytes(mf::max(gx, ax), mf::max(x, ax), "max axis " + std::to_string(ax));
      }
      expect_near(mf::sum_squares(gx), mf::sum_squares(x), tol, 0, "sum_squares");
    }
    // argmax: ties keep the first index; NaN at index 0 wins, later NaNs are skipped.
    std::vector<double> v = {1, 3, 3, NAN, 2, NAN, 5, 5, 0, 0, -INFINITY, -INFINITY};
    Tensor x = mf::cast(mf::from_vector(v, {3, 4}), dt);
    Tensor ref_out = mf::empty({3, 1}, dt), ref_arg = mf::empty({3, 1}, DType::kI64);
    cpu_k<kn::Reduce>("reduce", dt)(kn::ReduceOp::kMax, x, 3, 4, 1, ref_out, ref_arg);
    Tensor got_out = mf::empty({3, 1}, dt, gpu_dev()), got_arg = mf::empty({3, 1}, DType::kI64, gpu_dev());
    gpu_k<kn::Reduce>("reduce", dt)(kn::ReduceOp::kMax, gpu(x), 3, 4, 1, got_out, got_arg);
    expect_same_bytes(got_out, ref_out, "max with ties/NaN");
    expect_same_bytes(got_arg, ref_arg, "argmax with ties/NaN");
  }
}

TEST(CudaBasic, IndexSelectAddGatherScatterDeterministic) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    // Embedding-like: x (1, n, inner), index (m) with many repeats.
    const int64_t n = 1000, m = 5000, inner = 96;
    Tensor x = randn({1, n, inner}, 14, dt);
    std::vector<int64_t> idx(m);
    for (int64_t j = 0; j < m; ++j) idx[j] = (j * 7919 + j * j) % (j % 3 == 0 ? 13 : n);
    Tensor index = mf::from_vector(idx, {m});
    Tensor ref = mf::empty({1, m, inner}, dt), got = mf::empty({1, m, inner}, dt, gpu_dev());
    cpu_k<kn::IndexSelect>("index_select", dt)(x, index, ref);
    gpu_k<kn::IndexSelect>("index_select", dt)(gpu(x), gpu(index), got);
    expect_same_bytes(got, ref, "index_select");
    Tensor dy = randn({1, m, inner}, 15, dt);
    Tensor dx = randn({1, n, inner}, 16, dt), gdx = gpu(dx);
    cpu_k<kn::IndexAdd>("index_add", dt)(dy, index, dx);
    gpu_k<kn::IndexAdd>("index_add", dt)(gpu(dy), gpu(index), gdx);
    expect_same_bytes(gdx, dx, "index_add (CPU order)");
    // gather / scatter_add over axis 1 of (outer, n2, inner2)
    const int64_t outer = 6, n2 = 50, m2 = 40, inner2 = 9;
    Tensor x2 = randn({outer, n2, inner2}, 17, dt);
    std::vector<int64_t> gi(outer * m2 * inner2);
    for (size_t t = 0; t < gi.size(); ++t) gi[t] = static_cast<int64_t>((t * 31 + t / 7) % 5 == 0 ? 3 : (t * 13) % n2);
    Tensor gidx = mf::from_vector(gi, {outer, m2, inner2});
    Tensor gref = mf::empty({outer, m2, inner2}, dt), ggot = mf::empty({outer, m2, inner2}, dt, gpu_dev());
    cpu_k<kn::Gather>("gather", dt)(x2, gidx, gref);
    gpu_k<kn::Gather>("gather", dt)(gpu(x2), gpu(gidx), ggot);
    expect_same_bytes(ggot, gref, "gather");
    Tensor dy2 = randn({outer, m2, inner2}, 18, dt), dx2 = randn({outer, n2, inner2}, 19, dt), gdx2 = gpu(dx2);
    cpu_k<kn::ScatterAdd>("scatter_add", dt)(dy2, gidx, dx2);
    gpu_k<kn::ScatterAdd>("scatter_add", dt)(gpu(dy2), gpu(gidx), gdx2);
    expect_same_bytes(gdx2, dx2, "scatter_add (CPU order)");
  }
}

TEST(CudaBasic, Softmax) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    const double tol = dt == DType::kF64 ? 1e-13 : 2e-6;
    for (Shape s : {Shape{300, 7}, Shape{64, 1000}, Shape{4, 50257}}) {
      Tensor x = mf::scale(randn(s, 20, dt), 4.0), dy = randn(s, 21, dt);
      for (bool log : {false, true}) {
        Tensor y = mf::empty(s, dt), gy = mf::empty(s, dt, gpu_dev());
        cpu_k<kn::SoftmaxForward>("softmax", dt)(x, y, log);
        gpu_k<kn::SoftmaxForward>("softmax", dt)(gpu(x), gy, log);
        expect_near(gy, y, tol, tol, log ? "log_softmax" : "softmax");
        Tensor dx = mf::empty(s, dt), gdx = mf::empty(s, dt, gpu_dev());
        cpu_k<kn::SoftmaxBackward>("softmax_backward", dt)(dy, y, dx, log);
        gpu_k<kn::SoftmaxBackward>("softmax_backward", dt)(gpu(dy), gpu(y), gdx, log);
        expect_near(gdx, dx, tol, tol, log ? "log_softmax backward" : "softmax backward");
      }
    }
  }
}

TEST(CudaBasic, RandomBitIdenticalToCpu) {
  MFT_NEED_GPU();
  const mf::LogicalSlice whole;
  const mf::LogicalSlice piece{{8, 12, 33}, {2, 4, 5}};  // local (3, 5, 20) at (2, 4, 5)
  for (DType dt : kFloatTypes) {
    for (const auto& [shape, slice] : {std::pair{Shape{7, 1001}, whole}, std::pair{Shape{3, 5, 20}, piece}}) {
      Tensor x = randn(shape, 22, dt);
      Tensor ref = mf::empty(shape, dt), got = mf::empty(shape, dt, gpu_dev());
      cpu_k<kn::Dropout>("dropout", dt)(x, ref, 0.1, 1234, 77, slice);
      gpu_k<kn::Dropout>("dropout", dt)(gpu(x), got, 0.1, 1234, 77, slice);
      expect_same_bytes(got, ref, "dropout");
      cpu_k<kn::RandomFill>("random_fill", dt)(ref, false, -0.5, 2.0, 99, 5, slice);
      gpu_k<kn::RandomFill>("random_fill", dt)(got, false, -0.5, 2.0, 99, 5, slice);
      expect_same_bytes(got, ref, "uniform");
      cpu_k<kn::RandomFill>("random_fill", dt)(ref, true, 0.1, 0.02, 99, 6, slice);
      gpu_k<kn::RandomFill>("random_fill", dt)(got, true, 0.1, 0.02, 99, 6, slice);
      // Bit-identical is the aim, but device log/cos may differ from glibc's in the last ulp:
      // f32 results must match exactly; f64 ones are reported and compared to 1e-14.
      if (dt == DType::kF32) {
        expect_same_bytes(got, ref, "normal");
      } else {
        std::vector<double> gv = to_f64(host(got)), rv = to_f64(ref);
        int64_t differ = 0;
        for (size_t i = 0; i < gv.size(); ++i) differ += gv[i] != rv[i];
        std::cout << "[ info ] normal f64: " << differ << " of " << gv.size() << " elements differ from the CPU\n";
        expect_near(got, ref, 1e-14, 1e-15, "normal f64");
      }
    }
  }
}

TEST(CudaBasic, Rope) {
  MFT_NEED_GPU();
  for (DType dt : kFloatTypes) {
    const double tol = dt == DType::kF64 ? 1e-14 : 1e-6;
    Tensor x = randn({2, 3, 17, 64}, 23, dt);
    const std::vector<double> inv_freq = mf::rope_inv_freq(64, 10000.0);
    for (int sign : {1, -1}) {
      Tensor ref = mf::empty(x.shape(), dt), got = mf::empty(x.shape(), dt, gpu_dev());
      cpu_k<kn::Rope>("rope", dt)(x, inv_freq.data(), 5, sign, ref);
      gpu_k<kn::Rope>("rope", dt)(gpu(x), inv_freq.data(), 5, sign, got);
      expect_near(got, ref, tol, tol, "rope");
    }
  }
}

TEST(CudaBasic, OptimizerUpdates) {
  MFT_NEED_GPU();
  mf::NoGradGuard ng;
  for (DType dt : kFloatTypes) {
    const double tol = dt == DType::kF64 ? 1e-14 : 1e-6;
    Tensor p = randn({1000, 3}, 24, dt), g = randn({1000, 3}, 25, dt);
    Tensor m = mf::scale(randn({1000, 3}, 26, dt), 0.1), v = mf::scale(rand_uniform({1000, 3}, 0, 1, 27, dt), 0.01);
    Tensor gp = gpu(p), gm = gpu(m), gv = gpu(v);
    mf::adamw_update_(p, g, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.1, 3);
    mf::adamw_update_(gp, gpu(g), gm, gv, 1e-3, 0.9, 0.95, 1e-8, 0.1, 3);
    expect_near(gp, p, tol, tol, "adamw param");
    expect_near(gm, m, tol, tol, "adamw exp_avg");
    expect_near(gv, v, tol, tol, "adamw exp_avg_sq");
    Tensor buf = randn({1000, 3}, 28, dt), gbuf = gpu(buf);
    mf::sgd_update_(p, g, buf, 0.1, 0.9, 0.01);
    mf::sgd_update_(gp, gpu(g), gbuf, 0.1, 0.9, 0.01);
    expect_near(gp, p, tol, tol, "sgd param");
    expect_near(gbuf, buf, tol, tol, "sgd buffer");
  }
}

TEST(CudaBasic, AdamWMultiMatchesPerTensor) {
  MFT_NEED_GPU();
  mf::NoGradGuard ng;
  for (DType dt : kFloatTypes) {
    std::vector<Tensor> p1, g, m1, v1, p2, m2, v2;
    std::vector<double> wd;
    const std::vector<int64_t> sizes = {1, 7, 65536, 65537, 200000, 3};
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor p = gpu(randn({sizes[i]}, 30 + i, dt));
      p1.push_back(p);
      p2.push_back(gpu(host(p)));
      g.push_back(gpu(randn({sizes[i]}, 40 + i, dt)));
      Tensor m = gpu(mf::scale(randn({sizes[i]}, 50 + i, dt), 0.1));
      Tensor v = gpu(rand_uniform({sizes[i]}, 0, 0.01, 60 + i, dt));
      m1.push_back(m);
      v1.push_back(v);
      m2.push_back(gpu(host(m)));
      v2.push_back(gpu(host(v)));
      wd.push_back(i % 2 ? 0.0 : 0.1);
    }
    ASSERT_TRUE(mf::has_adamw_multi(gpu_dev(), dt));
    mf::adamw_multi_update_(p1, g, m1, v1, 1e-3, 0.9, 0.95, 1e-8, wd, 7);
    for (size_t i = 0; i < sizes.size(); ++i) mf::adamw_update_(p2[i], g[i], m2[i], v2[i], 1e-3, 0.9, 0.95, 1e-8, wd[i], 7);
    for (size_t i = 0; i < sizes.size(); ++i) {
      expect_same_bytes(p1[i], host(p2[i]), "adamw_multi param " + std::to_string(i));
      expect_same_bytes(m1[i], host(m2[i]), "adamw_multi exp_avg " + std::to_string(i));
      expect_same_bytes(v1[i], host(v2[i]), "adamw_multi exp_avg_sq " + std::to_string(i));
    }
  }
}

}  // namespace
