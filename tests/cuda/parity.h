// CUDA parity harness: runs an op on the CPU and on the GPU from the same inputs and compares
// outputs and input gradients elementwise, |gpu - cpu| <= atol + rtol * |cpu|.
//
// Inputs are given as f32/f64 CPU tensors and rounded once into the dtype under test. The CPU
// reference computes from those rounded values in f32 (f64 for f64) — for bf16/f16 that is what
// the GPU's half kernels compute too (f32 math on rounded inputs), so its outputs are compared
// after rounding them into the storage type as well. Integer and bool inputs pass unchanged.
// Every test starts with MF_REQUIRE_GPU(): without a visible GPU it is skipped with a message.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/core/device.h"
#include "meshflow/ops/ops.h"

#define MF_REQUIRE_GPU()                                                                              \
  do {                                                                                               \
    if (::mf::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: CUDA parity test skipped"; \
  } while (0)

namespace mfc {

using mf::DType;
using mf::Shape;
using mf::Tensor;

inline mf::Device gpu() { return mf::cuda_device(0); }
inline mf::Device host() { return mf::cpu_device(); }

// Stated tolerances per dtype (outputs and gradients of one op). f32: reductions run in a
// different order than on the CPU; bf16/f16: one unit in the last place of the storage type.
struct Tol {
  double rtol, atol;
};
inline Tol tolerance(DType dt) {
  switch (dt) {
    case DType::kF64: return {1e-10, 1e-12};
    case DType::kF32: return {1e-4, 1e-5};
    case DType::kBF16: return {1.6e-2, 1e-2};
    case DType::kF16: return {2e-3, 1e-3};
    default: return {0, 0};
  }
}
inline const char* name(DType dt) { return mf::dtype_name(dt); }

// Uniform [lo, hi) f32 tensor from a fixed seed (std::mt19937: independent of meshflow's RNG).
inline Tensor uniform(const Shape& shape, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(static_cast<float>(lo), static_cast<float>(hi));
  std::vector<float> v(static_cast<size_t>(mf::shape_numel(shape)));
  for (auto& x : v) x = d(gen);
  return mf::from_vector(v, shape);
}
inline Tensor normal(const Shape& shape, uint32_t seed, double stddev = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, static_cast<float>(stddev));
  std::vector<float> v(static_cast<size_t>(mf::shape_numel(shape)));
  for (auto& x : v) x = d(gen);
  return mf::from_vector(v, shape);
}
inline Tensor int_ids(const Shape& shape, int64_t hi, uint32_t seed, DType dt = DType::kI64) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> d(0, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(mf::shape_numel(shape)));
  for (auto& x : v) x = d(gen);
  Tensor t = mf::from_vector(v, shape);
  return dt == DType::kI64 ? t : mf::cast(t, dt);
}
inline Tensor bools(const Shape& shape, double p_true, uint32_t seed) {
  std::mt19937 gen(seed);
  std::bernoulli_distribution d(p_true);
  std::vector<bool> v(static_cast<size_t>(mf::shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = d(gen);
  return mf::from_vector(v, shape);
}

// The f64 values of a CPU or GPU tensor, in logical order.
inline std::vector<double> values(const Tensor& t) {
  Tensor h = mf::to(t, host());
  if (mf::is_floating(h.dtype()) && h.dtype() != DType::kF64) h = mf::cast(h, DType::kF64);
  if (h.dtype() == DType::kF64) return h.to_vector<double>();
  if (h.dtype() == DType::kI64) {
    auto v = h.to_vector<int64_t>();
    return std::vector<double>(v.begin(), v.end());
  }
  return values(mf::cast(h, DType::kF64));
}

// gpu vs cpu (cpu rounded into `dt` first when dt is bf16/f16 and cpu is wider).
inline ::testing::AssertionResult close(const std::string& what, const Tensor& gpu_t, const Tensor& cpu_t, DType dt,
                                        Tol tol) {
  if (gpu_t.shape() != cpu_t.shape())
    return ::testing::AssertionFailure() << what << ": shape " << gpu_t.str() << " vs cpu " << cpu_t.str();
  Tensor ref = cpu_t;
  if (mf::is_half(dt) && mf::is_floating(ref.dtype()) && ref.dtype() != dt) ref = mf::cast(ref, dt);
  std::vector<double> g = values(gpu_t), c = values(ref);
  double worst = 0;
  int64_t bad = -1, nbad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::fabs(g[i] - c[i]);
    bool ok = err <= tol.atol + tol.rtol * std::fabs(c[i]) || (std::isnan(g[i]) && std::isnan(c[i])) ||
              (std::isinf(g[i]) && g[i] == c[i]);
    if (!ok) {
      if (bad < 0) bad = static_cast<int64_t>(i);
      ++nbad;
    }
    if (std::isfinite(err)) worst = std::max(worst, err / (tol.atol + tol.rtol * std::fabs(c[i])));
  }
  if (nbad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " [" << name(dt) << "]: " << nbad << " of " << g.size()
                                       << " elements differ; first at flat index " << bad << ": gpu " << g[bad]
                                       << " vs cpu " << c[bad] << " (rtol " << tol.rtol << ", atol " << tol.atol
                                       << ", worst error/tolerance " << worst << ")";
}

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct ParityOptions {
  bool backward = true;
  std::vector<bool> differentiable;  // per input; empty: every floating input
  Tol tol{-1, -1};                   // < 0: tolerance(dt)
  Tol grad_tol{-1, -1};              // < 0: tol
};

inline ParityOptions forward_only() {
  ParityOptions o;
  o.backward = false;
  return o;
}
inline ParityOptions with_tol(Tol t) {
  ParityOptions o;
  o.tol = t;
  return o;
}

// Runs fn on the CPU and on the GPU and compares the output and, with backward, the gradient
// of every differentiable floating input for an upstream gradient drawn from a fixed seed.
inline void expect_parity(const std::string& what, const OpFn& fn, const std::vector<Tensor>& inputs, DType dt,
                          ParityOptions opt = {}) {
  Tol tol = opt.tol.rtol >= 0 ? opt.tol : tolerance(dt);
  Tol gtol = opt.grad_tol.rtol >= 0 ? opt.grad_tol : tol;
  DType ref_dt = dt == DType::kF64 ? DType::kF64 : DType::kF32;
  std::vector<Tensor> cpu_in, gpu_in;
  std::vector<bool> diff;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined()) {
      cpu_in.emplace_back();
      gpu_in.emplace_back();
      diff.push_back(false);
      continue;
    }
    bool fl = mf::is_floating(x.dtype());
    bool d = opt.backward && fl && (opt.differentiable.empty() || opt.differentiable[i]);
    Tensor stored = fl ? mf::cast(x, dt) : x;
    Tensor c = fl ? mf::cast(stored, ref_dt).detach() : stored;
    Tensor g = mf::to(stored, gpu()).detach();
    if (d) {
      c = mf::clone(c).detach();
      c.set_requires_grad(true);
      g.set_requires_grad(true);
    }
    cpu_in.push_back(c);
    gpu_in.push_back(g);
    diff.push_back(d);
  }
  Tensor cpu_out = fn(cpu_in);
  Tensor gpu_out = fn(gpu_in);
  ASSERT_EQ(gpu_out.device().type, mf::DeviceType::kCUDA) << what << ": output not on the GPU";
  EXPECT_TRUE(close(what + " output", gpu_out, cpu_out, dt, tol));
  if (!opt.backward || !cpu_out.requires_grad()) return;
  Tensor dy = mf::cast(normal(cpu_out.shape(), 1234), gpu_out.dtype());
  cpu_out.backward(mf::cast(dy, cpu_out.dtype()));
  gpu_out.backward(mf::to(dy, gpu()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!diff[i]) continue;
    ASSERT_TRUE(gpu_in[i].grad().defined()) << what << ": no gpu gradient for input " << i;
    ASSERT_TRUE(cpu_in[i].grad().defined()) << what << ": no cpu gradient for input " << i;
    EXPECT_TRUE(close(what + " grad of input " + std::to_string(i), gpu_in[i].grad(), cpu_in[i].grad(), dt, gtol));
  }
}

// The float dtypes the GPU backend serves.
inline std::vector<DType> float_dtypes() { return {DType::kF32, DType::kBF16, DType::kF16, DType::kF64}; }

}  // namespace mfc
