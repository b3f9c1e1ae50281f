// The Vision Transformer (ViTForImageClassification): an image cut into patch_size² patches,
// each flattened (channels, P, P) and projected (the Conv2d of Hugging Face's patch embedding as a
// matrix product over flattened patches), a class token before them, learned position embeddings
// added; pre-LayerNorm encoder blocks (the shared layers::TransformerBlock, vit_block_spec:
// bidirectional attention, an exact-GELU MLP); the final LayerNorm and a classifier on the class
// token. Parameter names, shapes and layouts are Hugging Face's.
//
// Written once, on global tensors: query, key, value and the intermediate projection split their
// output features (whole heads), the attention output and the output projection their input
// features; the patch projection, the class token, the position embeddings and the classifier
// are whole on every rank.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/layers/block.h"
#include "meshflow/models/model.h"
#include "meshflow/models/vit/config.h"

namespace mf::models {

// Hugging Face's position-embedding interpolation for another image size: the class token's row
// kept, the (n, n) grid of patch rows resized to (m, m) with bicubic filtering (PyTorch's
// interpolate: align_corners false, A = -0.75, edges clamped). table (1, 1 + n², C) -> (1, 1 + m², C),
// any float dtype (computed in f64, returned in the table's dtype).
Tensor vit_interpolate_positions(const Tensor& table, int64_t m);

class VitModel : public ConfiguredModel<VitConfig> {
 public:
  explicit VitModel(const VitConfig& c, const ModelContext& ctx = {});
  // Hugging Face's initialisation, with normal draws where it truncates at 2 std: projections,
  // the patch projection, the class token and the position embeddings N(0, initializer_range),
  // biases 0, LayerNorm weights 1. Parameter i draws from a generator of its own.
  void init_weights(uint64_t seed);
  // Whole model only: the final LayerNorm's output (B, T, C) and the class logits (B, num_labels).
  Tensor hidden_states(const Batch& batch) const;
  Tensor logits(const Batch& batch) const;

  std::vector<nn::ParamUnit> parameter_units() const override;
  // Per token (patches and the class token): 6 x (every parameter but the class token, the
  // position embeddings and the classifier) + 12 x layers x hidden x T (attention scores and
  // values), plus the classifier's 6 x hidden x labels per image spread over its T tokens.
  double flops_per_token(int64_t seq_len) const override;
  BatchKind batch_kind() const override { return BatchKind::kImageClassification; }
  std::vector<double> loss_counts(const Batch& batch) const override { return {static_cast<double>(batch.rows())}; }
  std::vector<std::string> eval_metric_names() const override { return {"accuracy"}; }
  int64_t sequence_length(const Batch&) const override { return c_.sequence_length(); }

 protected:
  GlobalTensor embed(const GlobalTensor& pixels, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return final_norm_->forward(x); }
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  std::vector<std::pair<double, double>> metrics(const GlobalTensor& hidden, const Batch& batch) const override;
  uint64_t streams_per_layer() const override { return 3; }  // attention, attention output, MLP output dropout
  Shape hidden_shape(int64_t rows, int64_t) const override { return {rows, c_.sequence_length(), c_.hidden_size}; }

 private:
  GlobalTensor classify(const GlobalTensor& hidden) const;  // (B, T, C) -> (B, num_labels)

  std::shared_ptr<layers::ParamGroup> embeddings_, projection_;
  std::vector<std::shared_ptr<layers::TransformerBlock>> layers_;  // by layer (shape-only where another rank holds it)
  std::shared_ptr<layers::LayerNorm> final_norm_;
  std::shared_ptr<layers::Linear> classifier_;
};

}  // namespace mf::models
