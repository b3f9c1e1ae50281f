// A small test model: a token-embedding language model of residual MLP blocks, the proof that a
// second model is one folder plus one registry line (the trainer, checkpoints and the CLI know it
// only through models/model.h). Each position predicts the next token from its own token:
//
//   x = dropout(wte[ids])                                  (B, T, C)
//   x = x + dropout(fc2(gelu(fc1(norm_l(x)))))            per layer l, fc1 (C, F), fc2 (F, C)
//   loss = cross_entropy(norm(x) · wte^T, labels)         the head tied to the embedding
//
// Parameters: "wte.weight" (V, C), "layers.<l>.norm.{weight,bias}", "layers.<l>.fc1.{weight,bias}"
// (C, F), "layers.<l>.fc2.{weight,bias}" (F, C), "norm.{weight,bias}". Keys: model.num_layers,
// hidden_size, ffn_hidden_size (0: 4 C), vocab_size, embedding_dropout_prob,
// output_dropout_prob, layernorm_epsilon, initializer_range.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/models/model.h"
#include "meshflow/layers/layers.h"

namespace mf::models {

struct MlpLmConfig {
  int64_t vocab_size = 256;
  int64_t hidden_size = 32;
  int64_t ffn_hidden_size = 0;  // 0: 4 * hidden_size
  int64_t num_layers = 2;
  double embedding_dropout_prob = 0.0;
  double output_dropout_prob = 0.0;
  double layernorm_epsilon = 1e-5;
  double initializer_range = 0.02;
  TrainingSettings settings;  // dtype, recomputation (full blocks)
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
};

// The model.* keys (and the training settings) of a run config; vocabulary at least the
// tokenizer's.
MlpLmConfig mlp_lm_config(const Config& c, int64_t tokenizer_vocab_size);
// "MLP LM: layers 2, hidden 32, MLP 128, vocabulary 257".
std::string mlp_lm_describe(const MlpLmConfig& c);

class MlpLmBlock : public nn::Module {
 public:
  MlpLmBlock(const MlpLmConfig& c, const layers::Place& place);
  // (B, T, C) -> (B, T, C).
  GlobalTensor forward(const GlobalTensor& x) const;

 private:
  MlpLmConfig c_;
  std::shared_ptr<layers::LayerNorm> norm_;
  std::shared_ptr<layers::Conv1D> fc1_, fc2_;
};

class MlpLmModel : public Model {
 public:
  MlpLmModel(const MlpLmConfig& c, const ModelContext& ctx);
  // Parameter k of the whole model's order draws N(0, initializer_range) from a generator of its
  // own (fc2 scaled by 1/sqrt(2 L)); biases 0, norms 1/0.
  void init_weights(uint64_t seed);

  DType activation_dtype(Device device) const override;
  DType param_dtype() const override { return c_.settings.dtype; }
  std::vector<std::string> tied_parameters() const override { return {"wte.weight"}; }
  std::vector<nn::ParamUnit> parameter_units() const override;
  double flops_per_token(int64_t seq_len) const override;
  Config model_config() const override;
  std::string describe() const override { return mlp_lm_describe(c_); }

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return norm_->forward(x); }
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  // Stream 0: the embedding dropout; 1 + l: layer l's.
  uint64_t streams_per_layer() const override { return 1; }
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override { return {rows, seq_len, c_.hidden_size}; }
  // Whole layers (train.activation_checkpoint's layer range).
  std::optional<CheckpointGranularity> recomputation(int64_t layer) const override;

 private:
  MlpLmConfig c_;
  std::shared_ptr<layers::Embedding> wte_;
  std::vector<std::shared_ptr<MlpLmBlock>> blocks_;  // by layer (shape-only where another rank holds it)
  std::shared_ptr<layers::LayerNorm> norm_;
};

}  // namespace mf::models
