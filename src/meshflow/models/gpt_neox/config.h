// GPT-NeoX's sizes and options (the model.* section; Hugging Face's GPTNeoXForCausalLM, the
// Pythia suite's model) and its parameters' Hugging Face names and shapes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/core/shape.h"
#include "meshflow/models/model.h"
#include "meshflow/models/schema.h"

namespace mf::models {

struct GptNeoxConfig {
  int64_t vocab_size = 50432;
  int64_t max_seq_length = 2048;  // max_position_embeddings
  int64_t hidden_size = 6144;
  int64_t num_layers = 44;        // num_hidden_layers
  int64_t num_attention_heads = 64;
  int64_t ffn_hidden_size = 24576;  // intermediate_size
  double layernorm_epsilon = 1e-5;  // layer_norm_eps
  double rotary_pct = 0.25;         // the share of each head's features rotated
  double rope_theta = 10000.0;      // rotary_emb_base
  bool use_parallel_residual = true;
  bool tie_word_embeddings = false;
  double attention_dropout_prob = 0.0;  // attention_dropout
  double output_dropout_prob = 0.0;     // hidden_dropout
  double initializer_range = 0.02;
  TrainingSettings settings;  // dtype, recomputation
  int64_t head_chunk_elements = int64_t{1} << 24;

  int64_t dim() const { return hidden_size / num_attention_heads; }
  // Rotated features of a head: int(dim() * rotary_pct), Hugging Face's rotary_ndims.
  int64_t rotary_dims() const;
  void validate() const;  // throws naming the bad key
};

// Its hyperparameters: model.* keys, Hugging Face keys, sizes and structure.
const Schema<GptNeoxConfig>& gpt_neox_schema();
// The model.* keys (and training settings) of a run config; vocabulary at least the tokenizer's.
GptNeoxConfig gpt_neox_config(const Config& c, int64_t tokenizer_vocab_size);
// Its model.* keys as a run config writes them (model.name gpt_neox).
Config model_config(const GptNeoxConfig& c);
// "GPT-NeoX: layers 2, hidden 32, heads 4, MLP 48, rotary 2 of 8, parallel residual, ...".
std::string describe(const GptNeoxConfig& c);

}  // namespace mf::models
