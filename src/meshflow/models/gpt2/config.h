// GPT-2's sizes and options (the model.* section), and its parameters' names and shapes.
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

struct Gpt2Config {
  int64_t vocab_size = 50257;
  int64_t max_seq_length = 1024;  // n_positions
  int64_t hidden_size = 768;      // n_embd
  int64_t num_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t ffn_hidden_size = 0;  // 0: 4 * hidden_size
  double embedding_dropout_prob = 0.1;
  double attention_dropout_prob = 0.1;
  double output_dropout_prob = 0.1;
  double layernorm_epsilon = 1e-5;
  double initializer_range = 0.02;
  // Activation checkpointing: blocks [checkpoint_start_layer, checkpoint_end_layer) of the whole
  // model (end -1: num_layers) recompute in backward what `checkpoint_granularity` says.
  bool activation_checkpointing = false;
  CheckpointGranularity checkpoint_granularity = CheckpointGranularity::kFull;
  int64_t checkpoint_start_layer = 0;
  int64_t checkpoint_end_layer = -1;
  // The loss head computes logits (rows x vocabulary) in chunks of at most this many elements
  // (at least one row each), so with full checkpointing the whole (B T, V) logits never exist.
  int64_t head_chunk_elements = int64_t{1} << 24;
  // The parameters' (and gradients') dtype. f32 or f64 (exactness tests): computed in it. bf16
  // or f16 (mixed precision, train.amp): on the CPU computed in f32 with bf16/f16 rounding of the
  // activations, on a device with native half kernels (CUDA) computed in bf16/f16 with f32
  // accumulation (nn/mixed_precision.h); the optimizer keeps f32 master weights.
  DType dtype = DType::kF32;
  DType param_dtype() const { return dtype; }
  DType compute_dtype() const { return mf::compute_dtype(dtype); }  // f32 for bf16/f16
  // The dtype of the activations between layers (also the messages between ranks) on `device`:
  // `dtype` itself where bf16/f16 run natively there (mf::native_half: CUDA), else
  // compute_dtype() (the CPU computes bf16/f16 models in f32, rounding the activations).
  DType activation_dtype(Device device) const;
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  void validate() const;  // throws naming the bad field
  // Whether block `layer` (a whole-model index) is checkpointed.
  bool checkpointed(int64_t layer) const;
};

// The run config's model.* sizes and its training settings (training_settings()); vocab_size is
// the tokenizer's when that is larger than model.vocab_size. Validated.
// Its hyperparameters: model.* keys, Hugging Face keys, sizes and structure.
const Schema<Gpt2Config>& gpt2_schema();
Gpt2Config gpt2_config(const Config& c, int64_t tokenizer_vocab_size);
// The model.* keys of `g` (model.name gpt2).
Config model_config(const Gpt2Config& g);
// "GPT-2: layers 12, hidden 768, heads 12, MLP 3072, vocabulary 50257, positions 1024".
std::string describe(const Gpt2Config& g);


}  // namespace mf::models
