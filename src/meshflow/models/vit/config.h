// The Vision Transformer's sizes and options (the model.* section) — ViTForImageClassification —
// and its parameters' Hugging Face names and shapes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/core/device.h"
#include "meshflow/core/dtype.h"
#include "meshflow/core/shape.h"
#include "meshflow/models/model.h"
#include "meshflow/models/schema.h"

namespace mf::models {

struct VitConfig {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  int64_t hidden_size = 768;
  int64_t num_layers = 12;              // num_hidden_layers
  int64_t num_attention_heads = 12;
  int64_t ffn_hidden_size = 3072;       // intermediate_size
  int64_t num_labels = 1000;
  double layernorm_epsilon = 1e-12;     // layer_norm_eps
  double embedding_dropout_prob = 0.0;  // hidden_dropout_prob after the position embeddings
  double attention_dropout_prob = 0.0;  // attention_probs_dropout_prob
  double output_dropout_prob = 0.0;     // hidden_dropout_prob after the attention output and the MLP
  double initializer_range = 0.02;
  TrainingSettings settings;

  int64_t grid() const { return image_size / patch_size; }             // patches per side
  int64_t num_patches() const { return grid() * grid(); }
  int64_t sequence_length() const { return num_patches() + 1; }         // the class token first
  int64_t patch_features() const { return num_channels * patch_size * patch_size; }
  void validate() const;  // throws naming the bad key
};

// The model.* keys (and training settings) of a run config.
// Its hyperparameters: model.* keys, Hugging Face keys, sizes and structure.
const Schema<VitConfig>& vit_schema();
VitConfig vit_config(const Config& c);
// Its model.* keys as a run config writes them.
Config model_config(const VitConfig& c);
// "ViT: image 32, patch 4 (64 patches), layers 4, hidden 64, heads 4, MLP 256, labels 10".
std::string describe(const VitConfig& c);

}  // namespace mf::models
