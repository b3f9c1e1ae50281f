// Helpers of the tests that check a model against a committed PyTorch reference
// (tests/golden/*.json written by scripts/make_*_golden.py): the file, integer batches, weights.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "meshflow/core/atomic_file.h"
#include "meshflow/models/model.h"
#include "meshflow/nn/module.h"
#include "testing.h"

namespace mft {

inline nlohmann::json golden_file(const std::string& name) {
  return nlohmann::json::parse(mf::read_file(std::string(MESHFLOW_SOURCE_DIR) + "/tests/golden/" + name));
}

// Nested integer lists ((B, T) or (B)) as an i64 tensor of that shape.
inline Tensor int_tensor(const nlohmann::json& v) {
  std::vector<int64_t> flat;
  mf::Shape shape = {static_cast<int64_t>(v.size())};
  if (!v.empty() && v[0].is_array()) {
    shape.push_back(static_cast<int64_t>(v[0].size()));
    for (auto& r : v)
      for (auto& e : r) flat.push_back(e.get<int64_t>());
  } else {
    for (auto& e : v) flat.push_back(e.get<int64_t>());
  }
  return mf::from_vector(flat, shape);
}

// The largest |got - ref| / max(|ref|, 0.1 max|ref|) of a tensor (expect_rel_close's measure).
inline double rel_error(const Tensor& got, const std::vector<double>& ref) {
  double mx = 0, worst = 0;
  for (double r : ref) mx = std::max(mx, std::abs(r));
  const std::vector<double> g = to_f64(got);
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - ref[i]) / std::max(std::abs(ref[i]), 0.1 * mx));
  return worst;
}

// Loads the reference's weights ({name: {shape, data}}) into every parameter of `model`, cast to
// `dt`; fails when a parameter has no reference or the reference holds more.
inline void load_golden_weights(mf::nn::Module& model, const nlohmann::json& weights, DType dt) {
  mf::nn::NamedTensors state;
  for (auto& [pname, t] : model.named_parameters()) {
    ASSERT_TRUE(weights.contains(pname)) << "no reference weight " << pname;
    const nlohmann::json& w = weights[pname];
    ASSERT_EQ(t.shape(), w["shape"].get<mf::Shape>()) << pname;
    state.emplace_back(pname, mf::cast(mf::from_vector(w["data"].get<std::vector<double>>(), t.shape()), dt));
  }
  ASSERT_EQ(state.size(), weights.size());
  model.load_state_dict(state);
}

// A causal language model against one golden case {name, ids, labels, weights, logits, loss,
// grads, torch_f32_grad_error}: logits and loss within rtol; every gradient within rtol, or, in
// f32, within twice what PyTorch's own f32 run of the same model reaches (the f32 floor of
// gradients that sum cancelling terms; the BLAS's kernel, AVX2 or AVX-512, changes the order of
// the sums and so the error: 1.57 times PyTorch's on an AVX-512 Xeon). `model` is fresh, of dtype `dt`; prints the largest
// gradient error.
template <class M>
void expect_causal_lm_matches_golden(M& model, const nlohmann::json& g, DType dt, double rtol) {
  const std::string name = g["config"]["name"];
  SCOPED_TRACE(name);
  load_golden_weights(model, g["weights"], dt);
  Tensor ids = int_tensor(g["ids"]), labels = int_tensor(g["labels"]);
  expect_rel_close(model.logits(ids), g["logits"].get<std::vector<double>>(), rtol, "logits");
  Tensor loss = model.loss(ids, labels);
  EXPECT_NEAR(loss.item(), g["loss"].get<double>(), rtol * g["loss"].get<double>());
  loss.backward();
  const double torch_f32 = g["torch_f32_grad_error"].get<double>();
  const double grad_tol = dt == DType::kF32 ? std::max(rtol, 2.0 * torch_f32) : rtol;
  double worst = 0;
  for (auto& [pname, t] : model.named_parameters()) {
    const double e = rel_error(t.grad(), g["grads"][pname].template get<std::vector<double>>());
    EXPECT_LE(e, grad_tol) << "grad " << pname;
    worst = std::max(worst, e);
  }
  std::printf("%s %s: largest gradient error %.3g (tolerance %.3g; PyTorch f32 %.3g)\n", name.c_str(), mf::dtype_name(dt),
              worst, grad_tol, torch_f32);
}

// Selective and full recomputation give the plain step's loss and gradients bit for bit: the
// model of config `c` (a struct with .settings) on the batch of golden case `g`, in f64.
template <class M, class C>
void expect_recomputation_exact(C c, const nlohmann::json& g) {
  std::vector<std::vector<double>> grads[3];
  double losses[3];
  for (int mode = 0; mode < 3; ++mode) {
    c.settings.recompute = mode > 0;
    c.settings.granularity = mode == 1 ? mf::models::CheckpointGranularity::kSelective : mf::models::CheckpointGranularity::kFull;
    M m(c);
    m.init_weights(5);
    Tensor loss = m.loss(int_tensor(g["ids"]), int_tensor(g["labels"]));
    loss.backward();
    losses[mode] = loss.item();
    for (auto& [pname, t] : m.named_parameters()) grads[mode].push_back(to_f64(t.grad()));
  }
  for (int mode = 1; mode < 3; ++mode) {
    EXPECT_EQ(losses[mode], losses[0]) << mode;
    EXPECT_EQ(grads[mode], grads[0]) << mode;
  }
}

}  // namespace mft
