// T5's sizes and options (the model.* section) — T5ForConditionalGeneration in its two variants:
// T5 v1.0 (a ReLU MLP, the output projection tied to the shared embedding) and T5 v1.1 / mT5 (a
// gated-GELU MLP, an untied lm_head) — and its parameters' Hugging Face names and shapes.
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

struct T5Config {
  bool mt5 = false;                    // model.name mt5 (model_type mt5): T5 v1.1's blocks, mT5's files
  int64_t vocab_size = 32128;
  int64_t hidden_size = 768;           // d_model
  int64_t num_layers = 12;             // encoder blocks
  int64_t num_decoder_layers = 12;     // decoder blocks
  int64_t num_attention_heads = 12;
  int64_t head_dim = 64;               // d_kv: heads * head_dim need not be hidden_size
  int64_t ffn_hidden_size = 3072;      // d_ff
  bool gated_gelu = false;             // feed_forward_proj: relu (v1.0) | gated-gelu (v1.1, mT5)
  bool tie_word_embeddings = true;     // v1.0: lm_head is the shared embedding (the output scaled by d_model^-0.5)
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  int64_t max_seq_length = 512;        // the encoder's length of a sample
  int64_t decoder_seq_length = 114;    // the decoder's length of a sample (the targets)
  int64_t pad_token_id = 0;            // also the decoder's start token
  double layernorm_epsilon = 1e-6;
  double embedding_dropout_prob = 0.1;  // dropout_rate: after the embeddings and each stack's final norm
  double attention_dropout_prob = 0.1;  // dropout_rate: on the attention weights
  double output_dropout_prob = 0.1;     // dropout_rate: after each sublayer and inside the MLP
  double initializer_factor = 1.0;
  TrainingSettings settings;
  int64_t head_chunk_elements = int64_t{1} << 24;  // the loss head's logits per chunk

  int64_t inner_dim() const { return num_attention_heads * head_dim; }
  int64_t total_layers() const { return num_layers + num_decoder_layers; }
  void validate() const;  // throws naming the bad key
};

// The model.* keys (and training settings) of a run config; vocabulary at least the tokenizer's.
// Its hyperparameters but model.feed_forward_proj (a name): model.* keys, Hugging Face keys, sizes
// and structure. model.name is t5 or mt5.
const Schema<T5Config>& t5_schema();
T5Config t5_config(const Config& c, int64_t tokenizer_vocab_size);
// Its model.* keys as a run config writes them.
Config model_config(const T5Config& c);
// "T5 v1.1 (gated-gelu, untied): layers 2+2, hidden 64, heads 4 x 16, MLP 128, vocabulary 2100".
std::string describe(const T5Config& c);
// The relative position bias tables' names (block 0 of each stack holds one).
std::string t5_bias_table(bool decoder);

}  // namespace mf::models
