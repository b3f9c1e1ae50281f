// The Llama family's sizes and options (the model.* section) — LlamaForCausalLM,
// Qwen2ForCausalLM and MistralForCausalLM are one model with options — and its parameters'
// Hugging Face names and shapes.
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

// Which Hugging Face class the options are written as (model_type and architecture).
enum class LlamaVariant { kLlama, kQwen2, kMistral };
const char* llama_variant_name(LlamaVariant v);  // "llama", "qwen2", "mistral"

// Llama 3.1's rotary frequency scaling (rope_scaling with rope_type "llama3").
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  LlamaVariant variant = LlamaVariant::kLlama;
  int64_t vocab_size = 32000;
  int64_t max_seq_length = 4096;     // max_position_embeddings
  int64_t hidden_size = 4096;
  int64_t num_layers = 32;           // num_hidden_layers
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;   // 0: num_attention_heads
  int64_t head_dim = 0;              // 0: hidden_size / num_attention_heads
  int64_t ffn_hidden_size = 11008;   // intermediate_size
  double layernorm_epsilon = 1e-6;  // rms_norm_eps
  double rope_theta = 10000.0;
  bool llama3_rope = false;          // rope_scaling {rope_type: llama3}
  Llama3RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;             // Qwen2
  int64_t sliding_window = 0;        // 0: none; W: a position attends to the W latest, itself included
  double attention_dropout_prob = 0.0;
  double initializer_range = 0.02;
  TrainingSettings settings;         // dtype, recomputation
  int64_t head_chunk_elements = int64_t{1} << 24;  // the loss head's logits per chunk

  int64_t kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
  int64_t dim() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  // The rotary inverse frequencies of one head (dim() / 2 of them), scaled as rope_scaling says.
  std::vector<double> rope_inv_freq() const;
  void validate() const;  // throws naming the bad key
};

// Its hyperparameters but rope_scaling's (read and written by hand: a type and a nested object):
// model.* keys, Hugging Face keys, sizes and structure. model.name is the variant's.
const Schema<LlamaConfig>& llama_schema();
// The model.* keys (and training settings) of a run config; vocabulary at least the tokenizer's.
LlamaConfig llama_config(const Config& c, int64_t tokenizer_vocab_size);
// Its model.* keys as a run config writes them (model.name = the variant's name).
Config model_config(const LlamaConfig& c);
// "Llama: layers 2, hidden 64, heads 4 (kv 2), MLP 172, vocabulary 256, positions 128".
std::string describe(const LlamaConfig& c);

}  // namespace mf::models
