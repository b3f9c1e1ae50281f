// Test helpers: random tensors, non-contiguous copies, and the finite-difference gradient
// check every op with a backward goes through.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/ops/ops.h"

namespace mft {

using mf::DType;
using mf::Shape;
using mf::Tensor;

// Standard-normal tensor from its own Philox stream (independent of the default generator).
inline Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::kF64) {
  mf::Generator g(seed);
  Tensor t = mf::empty(shape, dtype);
  mf::normal_(t, 0.0, 1.0, &g);
  return t;
}

inline Tensor rand_uniform(const Shape& shape, double lo, double hi, uint64_t seed, DType dtype = DType::kF64) {
  mf::Generator g(seed);
  Tensor t = mf::empty(shape, dtype);
  mf::uniform_(t, lo, hi, &g);
  return t;
}

// Same values, non-contiguous storage: the data lives transposed (rank >= 2) or every other
// element (rank 1) in a larger buffer.
inline Tensor non_contiguous(const Tensor& t) {
  mf::NoGradGuard ng;
  if (t.ndim() >= 2) {
    Tensor stored = mf::contiguous(mf::transpose(t, 0, -1));
    Tensor v = mf::transpose(stored, 0, -1).detach();
    return v;
  }
  int64_t n = t.numel();
  Tensor big = mf::zeros({2 * std::max<int64_t>(n, 1)}, t.dtype());
  Tensor v = mf::make_view(big, t.shape(), {2}, 0);
  mf::copy_(v, t);
  return v;
}

inline double* element_ptr(const Tensor& t, int64_t flat) {
  double* base = static_cast<double*>(t.raw_data());
  int64_t off = 0;
  for (int64_t d = t.ndim() - 1; d >= 0; --d) {
    int64_t i = flat % t.shape(d);
    flat /= t.shape(d);
    off += i * t.stride(d);
  }
  return base + off;
}

inline double weighted_sum(const Tensor& out, const std::vector<double>& w) {
  std::vector<double> v = mf::cast(out, DType::kF64).to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
  return s;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks d(sum(f(inputs) * w))/d(input) from backward against central differences, for every
// f64 input (others are passed through untouched). |analytic - numeric| <= atol + rtol*|numeric|.
inline void gradcheck(const Fn& f, std::vector<Tensor> inputs, double eps = 1e-6, double atol = 1e-7,
                      double rtol = 1e-5, const std::string& what = "") {
  std::vector<bool> check(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check[i] = inputs[i].defined() && inputs[i].dtype() == DType::kF64;
    if (check[i]) {
      inputs[i].zero_grad();
      inputs[i].set_requires_grad(true);
    }
  }
  Tensor out = f(inputs);
  std::vector<double> w = randn(out.shape(), 4242).to_vector<double>();
  Tensor wt = mf::from_vector(w, out.shape());
  mf::sum(mf::mul(mf::cast(out, DType::kF64), wt)).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!check[i]) continue;
    Tensor g = inputs[i].grad();
    ASSERT_TRUE(g.defined()) << what << ": input " << i << " got no gradient";
    std::vector<double> ga = g.to_vector<double>();
    int64_t n = inputs[i].numel();
    int failures = 0;
    for (int64_t e = 0; e < n && failures < 5; ++e) {
      double* p = element_ptr(inputs[i], e);
      double orig = *p;
      double lp, lm;
      {
        mf::NoGradGuard ng;
        *p = orig + eps;
        lp = weighted_sum(f(inputs), w);
        *p = orig - eps;
        lm = weighted_sum(f(inputs), w);
        *p = orig;
      }
      double num = (lp - lm) / (2 * eps);
      if (!(std::abs(ga[e] - num) <= atol + rtol * std::abs(num))) {
        ++failures;
        ADD_FAILURE() << what << ": input " << i << " " << inputs[i].str() << " element " << e << ": analytic "
                      << ga[e] << " numeric " << num;
      }
    }
    inputs[i].zero_grad();
  }
}

// |got - ref| <= atol + rtol * |ref| elementwise.
inline void expect_close(const Tensor& got, const std::vector<double>& ref, double rtol, double atol,
                         const std::string& what = "") {
  std::vector<double> g = mf::cast(got, DType::kF64).to_vector<double>();
  ASSERT_EQ(g.size(), ref.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    if (!(std::abs(g[i] - ref[i]) <= atol + rtol * std::abs(ref[i]))) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " got " << g[i] << " expected " << ref[i];
    }
  }
}

inline std::vector<double> to_f64(const Tensor& t) { return mf::cast(t, DType::kF64).to_vector<double>(); }

// Expects `stmt` to throw mf::Error whose message contains every string of `parts`.
#define MFT_EXPECT_ERROR(stmt, ...)                                                        \
  do {                                                                                     \
    try {                                                                                  \
      stmt;                                                                                \
      ADD_FAILURE() << "expected mf::Error from " #stmt;                                   \
    } catch (const mf::Error& e) {                                                         \
      for (const char* part : {__VA_ARGS__})                                               \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)                     \
            << "message '" << e.what() << "' lacks '" << part << "'";                      \
    }                                                                                      \
  } while (0)

}  // namespace mft

namespace mft {
// f32 result against an f64 reference at relative tolerance rtol: each element's error is
// measured against max(|ref|, 0.1 * max|ref|), so entries that cancel to ~0 are judged at the
// tensor's scale rather than at their own.
inline void expect_rel_close(const Tensor& got, const std::vector<double>& ref, double rtol, const std::string& what = "") {
  double mx = 0;
  for (double r : ref) mx = std::max(mx, std::abs(r));
  std::vector<double> g = to_f64(got);
  ASSERT_EQ(g.size(), ref.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    double denom = std::max(std::abs(ref[i]), 0.1 * mx);
    if (!(std::abs(g[i] - ref[i]) <= rtol * denom)) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " got " << g[i] << " expected " << ref[i] << " (rel err "
                    << std::abs(g[i] - ref[i]) / denom << ")";
    }
  }
}
}  // namespace mft
