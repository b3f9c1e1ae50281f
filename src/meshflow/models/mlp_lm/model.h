// A small test model: a token-embedding language model of residual MLP blocks, the proof that a
// model is one folder plus one registry line (the trainer, checkpoints and the CLI know it only
// through models/model.h). Each position predicts the next token from its own token:
//
//   x = dropout(wte[ids])                                  (B, T, C)
//   x = x + dropout(fc2(gelu(fc1(norm_l(x)))))            per layer l, fc1 (C, F), fc2 (F, C)
//   loss = cross_entropy(norm(x) · wte^T, labels)         the head tied to the embedding
//
// It is a DecoderLm (models/decoder_lm.h) whose blocks are the shared block without attention
// (layers/block.h: norm2 and the MLP, pre-norm). Parameters: "wte.weight" (V, C),
// "layers.<l>.norm.{weight,bias}", "layers.<l>.fc1.{weight,bias}" (C, F: the Conv1D layout),
// "layers.<l>.fc2.{weight,bias}" (F, C), "norm.{weight,bias}". Keys: model.num_layers,
// hidden_size, ffn_hidden_size (0: 4 C), vocab_size, embedding_dropout_prob,
// output_dropout_prob, layernorm_epsilon, initializer_range.
#pragma once
#include <string>

#include "meshflow/models/decoder_lm.h"
#include "meshflow/models/schema.h"

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
  TrainingSettings settings;  // dtype, recomputation (whole blocks)
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
};

// Its hyperparameters: model.* keys, sizes and structure.
const Schema<MlpLmConfig>& mlp_lm_schema();
// The model.* keys (and the training settings) of a run config; vocabulary at least the
// tokenizer's.
MlpLmConfig mlp_lm_config(const Config& c, int64_t tokenizer_vocab_size);
// "MLP LM: layers 2, hidden 32, MLP 128, vocabulary 257".
std::string describe(const MlpLmConfig& c);

// Its model.* keys as a run config writes them.
Config model_config(const MlpLmConfig& c);
// The decoder's spec. Initialisation (DecoderLm::init_weights): N(0, initializer_range), fc2
// scaled by 1/sqrt(2 L), biases 0, norms 1.
DecoderLmSpec decoder_spec(const MlpLmConfig& c);
using MlpLmModel = DecoderModel<MlpLmConfig>;

}  // namespace mf::models
