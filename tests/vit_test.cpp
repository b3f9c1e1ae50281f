// The Vision Transformer (ViTForImageClassification) against a reference written independently in
// PyTorch from Hugging Face's conventions (scripts/make_vit_golden.py): the patch embedding as a
// matrix product over flattened patches, the class token, the position embeddings, pre-LayerNorm
// blocks, the classifier on the class token — the final hidden states, the logits, the loss and
// every parameter gradient, f64 (1e-9) and f32 (1e-5, or 2.5 times PyTorch's own f32 error on the
// same model) — and Hugging Face's bicubic interpolation of the position embeddings for
// another image size, with the logits of 16-pixel images through them.
#include <cstdio>

#include "golden_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/models/registry.h"
#include "meshflow/models/vit/model.h"

namespace {
using namespace mft;
using json = nlohmann::json;
using mf::models::VitConfig;
using mf::models::VitModel;

VitConfig config_of(const json& g, DType dt, int64_t image_size = 0) {
  VitConfig c;
  c.image_size = image_size > 0 ? image_size : g["image_size"].get<int64_t>();
  c.patch_size = g["patch_size"];
  c.num_channels = g["num_channels"];
  c.hidden_size = g["hidden_size"];
  c.num_layers = g["num_hidden_layers"];
  c.num_attention_heads = g["num_attention_heads"];
  c.ffn_hidden_size = g["intermediate_size"];
  c.num_labels = g["num_labels"];
  c.layernorm_epsilon = g["layer_norm_eps"];
  c.settings.dtype = dt;
  return c;
}

Tensor shaped(const json& t, DType dt) {
  return mf::cast(mf::from_vector(t["data"].get<std::vector<double>>(), t["shape"].get<mf::Shape>()), dt);
}

void check_against_golden(DType dt, double rtol) {
  const json g = golden_file("vit_tiny.json");
  VitModel model(config_of(g["config"], dt));
  model.eval();
  load_golden_weights(model, g["weights"], dt);
  mf::models::Batch b;
  b.pixel_values = shaped(g["pixel_values"], dt);
  b.labels = int_tensor(g["labels"]);
  // f32: within 1e-5, or within 2.5 times PyTorch's own f32 error on the same model where that is
  // larger (the largest error over ~17k gradients is a noisy statistic: the key weights' gradients,
  // differences of nearly equal terms, reach 1.06e-5 here beside PyTorch's 6.2e-6).
  const double out_tol = dt == DType::kF32 ? std::max(rtol, 2.5 * g["torch_f32_logit_error"].get<double>()) : rtol;
  const double e_hidden = rel_error(model.hidden_states(b), g["hidden_states"].get<std::vector<double>>());
  const double e_logits = rel_error(model.logits(b), g["logits"].get<std::vector<double>>());
  EXPECT_LE(e_hidden, out_tol) << "hidden states";
  EXPECT_LE(e_logits, out_tol) << "logits";
  model.train();  // no dropout configured
  Tensor loss = model.loss(b);
  EXPECT_NEAR(loss.item(), g["loss"].get<double>(), rtol * g["loss"].get<double>());
  loss.backward();
  double scale = 0;
  for (auto& [pname, t] : model.named_parameters())
    for (double v : g["grads"][pname].get<std::vector<double>>()) scale = std::max(scale, std::abs(v));
  const std::vector<std::string> zero = g["zero_grad_params"].get<std::vector<std::string>>();
  const double grad_tol = dt == DType::kF32 ? std::max(rtol, 2.5 * g["torch_f32_grad_error"].get<double>()) : rtol;
  double worst = 0;
  for (auto& [pname, t] : model.named_parameters()) {
    ASSERT_TRUE(t.grad().defined()) << pname;
    if (std::find(zero.begin(), zero.end(), pname) != zero.end()) {  // key biases: exactly zero in exact arithmetic
      for (double v : to_f64(t.grad())) EXPECT_LE(std::abs(v), (dt == DType::kF32 ? 1e-6 : 1e-13) * scale) << pname;
      continue;
    }
    const double e = rel_error(t.grad(), g["grads"][pname].get<std::vector<double>>());
    EXPECT_LE(e, grad_tol) << "grad " << pname;
    worst = std::max(worst, e);
  }
  std::printf("vit %s: hidden states %.3g, logits %.3g, largest gradient error %.3g (tolerances %.3g, %.3g; PyTorch "
              "f32 %.3g, %.3g)\n",
              mf::dtype_name(dt), e_hidden, e_logits, worst, out_tol, grad_tol, g["torch_f32_logit_error"].get<double>(),
              g["torch_f32_grad_error"].get<double>());
}

TEST(Vit, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(Vit, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

// Position embeddings of a 3x3 grid interpolated to 4x4 and 2x2 as Hugging Face does (PyTorch's
// bicubic interpolate), and the logits of 16-pixel images with them.
TEST(Vit, PositionEmbeddingsInterpolateForAnotherImageSize) {
  const json g = golden_file("vit_tiny.json");
  const json& in = g["interpolated"];
  const Tensor table = shaped(json{{"shape", {1, 10, g["config"]["hidden_size"]}},
                                   {"data", g["weights"]["vit.embeddings.position_embeddings"]["data"]}},
                              DType::kF64);
  expect_rel_close(mf::models::vit_interpolate_positions(table, 4), in["to_16"]["data"].get<std::vector<double>>(), 1e-12,
                   "4x4");
  expect_rel_close(mf::models::vit_interpolate_positions(table, 2), in["to_8"]["data"].get<std::vector<double>>(), 1e-12,
                   "2x2");
  EXPECT_EQ(mf::models::vit_interpolate_positions(table, 3).to_vector<double>(), table.to_vector<double>());
  // The model at image size 16 with the interpolated table.
  VitModel model(config_of(g["config"], DType::kF64, 16));
  model.eval();
  json w = g["weights"];
  w["vit.embeddings.position_embeddings"] = {{"shape", {1, 17, g["config"]["hidden_size"]}}, {"data", in["to_16"]["data"]}};
  load_golden_weights(model, w, DType::kF64);
  mf::models::Batch b;
  b.pixel_values = shaped(in["pixel_values_16"], DType::kF64);
  expect_rel_close(model.logits(b), in["logits_16"].get<std::vector<double>>(), 1e-9, "logits at image size 16");
}

// vit-base-patch16-224's configuration builds the published parameter count (86,567,656 with the
// 1000-class head).
TEST(Vit, ShippedConfigsHaveThePublishedSizes) {
  const std::string dir = std::string(MESHFLOW_SOURCE_DIR) + "/configs/vit/";
  const mf::Config c = mf::Config::load(dir + "vit_base_patch16_224.yaml", {});
  int64_t n = 0;
  for (const auto& [name, shape] : mf::models::parameter_shapes(c)) n += mf::shape_numel(shape);
  EXPECT_EQ(n, 86567656);
  const mf::Config tiny = mf::Config::load(dir + "tiny.yaml", {});
  EXPECT_GT(mf::models::parameter_shapes(tiny).size(), 0u);
}

}  // namespace
