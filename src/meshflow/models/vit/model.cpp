#include "meshflow/models/vit/model.h"

#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"

namespace mf::models {

namespace {

// ViT's layer as a spec of the shared block (layers/block.h): pre-LayerNorm, bidirectional
// attention with biases (attention.attention.{query,key,value}, attention.output.dense), an
// exact-GELU MLP (intermediate.dense, output.dense), then the norms layernorm_before (the
// attention's) and layernorm_after (the MLP's); registered in that order.
layers::BlockSpec vit_block_spec(const VitConfig& c) {
  layers::BlockSpec s = layers::encoder_block_spec(c.hidden_size, c.num_attention_heads, c.ffn_hidden_size,
                                                   c.layernorm_epsilon, c.attention_dropout_prob, c.output_dropout_prob,
                                                   "attention.attention");
  s.norm1 = "layernorm_before";
  s.norm2 = "layernorm_after";
  s.order = {layers::BlockPart::kAttention, layers::BlockPart::kMlp, layers::BlockPart::kNorm1, layers::BlockPart::kNorm2};
  return s;
}

// PyTorch's cubic convolution weights (A = -0.75) of the 4 taps around a source position.
void cubic_weights(double t, double w[4]) {
  const double A = -0.75;
  auto near = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };           // |x| <= 1
  auto far = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };      // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

}  // namespace

Tensor vit_interpolate_positions(const Tensor& table, int64_t m) {
  MF_CHECK(table.ndim() == 3 && table.shape(0) == 1, "vit: position embeddings ", table.str(), " must be (1, 1 + n², C)");
  const int64_t rows = table.shape(1) - 1, C = table.shape(2);
  const int64_t n = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(rows))));
  MF_CHECK(n * n == rows && m > 0, "vit: position embeddings of ", rows, " patches are not a square grid (or ", m,
           " patches per side)");
  const Tensor src = contiguous(cast(to(table.detach(), cpu_device()), DType::kF64));
  Tensor out = zeros({1, 1 + m * m, C}, DType::kF64);
  const double* s = src.data<double>();
  double* o = out.data<double>();
  for (int64_t c = 0; c < C; ++c) o[c] = s[c];  // the class token's row
  const double scale = static_cast<double>(n) / static_cast<double>(m);
  auto taps = [&](int64_t i, int64_t idx[4], double w[4]) {  // output index -> 4 clamped source taps
    const double x = (static_cast<double>(i) + 0.5) * scale - 0.5;
    const double f = std::floor(x);
    cubic_weights(x - f, w);
    for (int k = 0; k < 4; ++k) idx[k] = std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(f) - 1 + k, 0), n - 1);
  };
  for (int64_t y = 0; y < m; ++y) {
    int64_t iy[4];
    double wy[4];
    taps(y, iy, wy);
    for (int64_t x = 0; x < m; ++x) {
      int64_t ix[4];
      double wx[4];
      taps(x, ix, wx);
      double* dst = o + (1 + y * m + x) * C;
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
          const double w = wy[a] * wx[b];
          const double* row = s + (1 + iy[a] * n + ix[b]) * C;
          for (int64_t c = 0; c < C; ++c) dst[c] += w * row[c];
        }
    }
  }
  return cast(out, table.dtype());
}


VitModel::VitModel(const VitConfig& c, const ModelContext& ctx) : ConfiguredModel(c, ctx, c.num_layers) {
  c.validate();
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size, P = c.patch_size;
  auto root = register_module("vit", std::make_shared<nn::ModuleGroup>());
  const layers::Place& e = embedding_placement();
  embeddings_ = root->add("embeddings", std::make_shared<layers::ParamGroup>(e));
  embeddings_->add_param("cls_token", {1, 1, C}, dt);
  embeddings_->add_param("position_embeddings", {1, c.sequence_length(), C}, dt);
  auto patches = embeddings_->add("patch_embeddings", std::make_shared<nn::ModuleGroup>());
  projection_ = patches->add("projection", std::make_shared<layers::ParamGroup>(e));
  projection_->add_param("weight", {C, c.num_channels, P, P}, dt);
  projection_->add_param("bias", {C}, dt);
  auto encoder = root->add("encoder", std::make_shared<nn::ModuleGroup>());
  auto group = encoder->add("layer", std::make_shared<nn::ModuleGroup>());
  for (int64_t l = 0; l < c.num_layers; ++l)
    layers_.push_back(
        group->add(std::to_string(l), std::make_shared<layers::TransformerBlock>(vit_block_spec(c), layer_placement(l), dt)));
  const layers::Place& h = head_placement();
  final_norm_ = root->add("layernorm", std::make_shared<layers::LayerNorm>(C, c.layernorm_epsilon, h, dt));
  classifier_ = register_module("classifier", std::make_shared<layers::Linear>(C, c.num_labels, h,
                                                                               layers::WeightSplit::kNone, dt, true));
}

void VitModel::init_weights(uint64_t seed) {
  init_normal(
      seed, [](const std::string& name, const Shape&) { return name.find("layernorm") != std::string::npos; },
      [this](const std::string&, const Shape&) { return c_.initializer_range; });
}

std::vector<nn::ParamUnit> VitModel::parameter_units() const {
  return layered_units({"vit.embeddings."}, "vit.encoder.layer.", {"vit.layernorm.", "classifier."});
}

double VitModel::flops_per_token(int64_t seq_len) const {
  double params = 0.0;
  for (const auto& [name, shape] : parameter_shapes())
    if (name != "vit.embeddings.cls_token" && name != "vit.embeddings.position_embeddings" &&
        name.compare(0, 11, "classifier.") != 0)
      params += static_cast<double>(shape_numel(shape));
  const double T = static_cast<double>(seq_len);
  const double classifier = 6.0 * static_cast<double>(c_.hidden_size * c_.num_labels) / T;
  // The patch projection runs on the patches only (T - 1 of the T tokens).
  const double patch = 6.0 * static_cast<double>(c_.hidden_size * c_.patch_features()) / T;
  return 6.0 * params - patch + classifier + 12.0 * static_cast<double>(c_.num_layers * c_.hidden_size) * T;
}

GlobalTensor VitModel::embed(const GlobalTensor& pixels, const Batch&) const {
  const int64_t B = pixels.logical_shape[0], ch = c_.num_channels, S = c_.image_size, P = c_.patch_size, n = c_.grid();
  const int64_t C = c_.hidden_size, N = c_.num_patches();
  MF_CHECK(pixels.logical_shape == Shape({B, ch, S, S}), "vit: pixel_values ", shape_str(pixels.logical_shape),
           " must be (batch, ", ch, ", ", S, ", ", S, ") (model.num_channels, model.image_size)");
  // Patches (B, N, ch P P), each flattened channel-major as the Conv2d weight (C, ch, P, P) is.
  GlobalTensor x = global::reshape(pixels, {B, ch, n, P, n, P});
  x = global::reshape(global::permute(x, {0, 2, 4, 1, 3, 5}), {B, N, ch * P * P});
  x = projection_->affine(x, "weight", "bias");  // (B, N, C)
  const GlobalTensor cls = global::expand(embeddings_->value("cls_token"), {B, 1, C});
  x = global::cat({cls, x}, 1);  // (B, N + 1, C)
  x = embeddings_->plus(x, "position_embeddings", {N + 1, C});
  return global::dropout(x, training() ? c_.embedding_dropout_prob : 0.0);
}

GlobalTensor VitModel::run_layer(int64_t layer, const GlobalTensor& x, const Batch&, bool recompute_inside) const {
  return layers_.at(static_cast<size_t>(layer))->forward(x, recompute_inside);
}

GlobalTensor VitModel::classify(const GlobalTensor& hidden) const {
  return classifier_->forward(global::select(hidden, 1, 0));  // the class token (B, C) -> (B, num_labels)
}

GlobalTensor VitModel::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  const int64_t B = hidden.logical_shape[0];
  MF_CHECK(batch.labels.defined() && batch.labels.shape() == Shape{B}, "vit: labels must be (batch) = (", B, "), got ",
           batch.labels.defined() ? batch.labels.str() : std::string("none"));
  return step_share(global::cross_entropy(classify(hidden), global::broadcast_beside(hidden, host_i64(batch.labels))),
                    static_cast<double>(B), totals.at(0));
}

std::vector<std::pair<double, double>> VitModel::metrics(const GlobalTensor& hidden, const Batch& batch) const {
  return {argmax_accuracy(classify(hidden).local, batch.labels)};
}

Tensor VitModel::hidden_states(const Batch& batch) const {
  return run_whole(batch, [](const GlobalTensor& h) { return h; });
}

Tensor VitModel::logits(const Batch& batch) const {
  return run_whole(batch, [this](const GlobalTensor& h) { return classify(h); });
}

}  // namespace mf::models
