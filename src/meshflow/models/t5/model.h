// T5 and mT5 (T5ForConditionalGeneration): an encoder and a decoder of pre-norm blocks with T5's
// RMS layer norm (no bias, no mean), attention without 1/sqrt(d) scaling plus a relative position
// bias (bucketed relative distances; bidirectional in the encoder, causal in the decoder; one
// table per stack, held by its block 0 and used by every block), cross-attention from the decoder
// to the encoder's output, a ReLU (v1.0) or gated-GELU (v1.1, mT5) MLP, the shared embedding for
// both inputs and the output projection (v1.0: the shared embedding, the output scaled by
// d_model^-0.5; v1.1: lm_head). Parameter names, shapes and layouts are Hugging Face's.
//
// One layered model: the layers are the encoder blocks then the decoder blocks (layer num_layers +
// j is decoder block j), one list whatever holds them. The activation between layers is the pair
// (encoder states, decoder states) joined along the sequence: (B, T_enc + T_dec, C). The
// embedding takes both inputs; an encoder block transforms the encoder part and passes the
// decoder part on; the first decoder block applies the encoder's final norm (and the decoder's
// embedding dropout); decoder blocks read the encoder part for cross-attention and pass it on, so
// the encoder's output travels with the micro-batch to every decoder block and its gradient comes
// back the same way. A part of the model holding blocks of a stack without its block 0 holds a
// copy of that stack's bias table (tied_parameters()).
//
// Written once, on global tensors: q, k, v and the MLP's input projections split their output
// features (whole heads), o and wo their input features; the shared embedding and lm_head split
// the vocabulary. The blocks are the shared layers::TransformerBlock (t5_block_spec); the bias
// tables layers/position_bias.h's.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/layers/block.h"
#include "meshflow/models/model.h"
#include "meshflow/models/t5/config.h"

namespace mf::models {

// A T5 block as the shared block's spec (layers/block.h): pre-norm with T5's RMS norm, attention
// without 1/sqrt(d) scaling nor biases (the relative position bias comes as an input), in the
// decoder cross-attention to the encoder's output, a ReLU or gated-GELU MLP with dropout on its
// hidden features; Hugging Face's names (layer.0.SelfAttention.q, layer.1.EncDecAttention.q,
// layer.{1,2}.DenseReluDense.wi, layer.{0,1,2}.layer_norm).
layers::BlockSpec t5_block_spec(const T5Config& c, bool decoder);

class T5Model : public ConfiguredModel<T5Config> {
 public:
  explicit T5Model(const T5Config& c, const ModelContext& ctx = {});
  // Hugging Face's initialisation (scaled by initializer_factor f): the shared embedding and
  // lm_head N(0, f), q N(0, f (C d_kv)^-1/2), k and v N(0, f C^-1/2), o N(0, f (H d_kv)^-1/2),
  // the bias tables N(0, f C^-1/2), wi N(0, f C^-1/2), wo N(0, f d_ff^-1/2), norms 1. Parameter i
  // draws from a generator of its own.
  void init_weights(uint64_t seed);
  // Whole model only, this rank's piece: the logits (B, T_dec, V) (split on the vocabulary with
  // the output projection) and the encoder's last hidden state (B, T_enc, C).
  Tensor logits(const Batch& batch) const;
  Tensor encoder_hidden_states(const Batch& batch) const;

  std::vector<std::string> tied_parameters() const override;
  std::vector<nn::ParamUnit> parameter_units() const override;
  // Per encoder token of a sample of seq_len encoder and decoder_seq_length decoder tokens: 6 x
  // (the encoder blocks' parameters x T_enc + the decoder blocks' and the output projection's x
  // T_dec) + 12 x inner x (T_enc^2 per encoder block + (T_dec^2 + T_dec T_enc) per decoder block),
  // divided by T_enc. The embedding lookups and the bias tables are not counted.
  double flops_per_token(int64_t seq_len) const override;
  BatchKind batch_kind() const override { return BatchKind::kSpanCorruption; }

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return x; }  // the head's, on the decoder part
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  // self-attention, its output, cross-attention, its output, the MLP's inner and output dropout,
  // and in decoder block 0 the encoder's final and the decoder embedding's dropout
  uint64_t streams_per_layer() const override { return 8; }
  uint64_t head_streams() const override { return 1; }  // the decoder's final dropout
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override {
    return {rows, seq_len + c_.decoder_seq_length, c_.hidden_size};
  }

 private:
  // The relative position bias (H, Tq, Tk) of a stack, from its table.
  GlobalTensor position_bias(bool decoder, int64_t tq, int64_t tk, const GlobalTensor& like) const;
  // hidden (B, T_enc + T_dec, C) B -> the decoder's output after its final norm and dropout,
  // scaled for the tied projection: (B, T_dec, C).
  GlobalTensor decoder_output(const GlobalTensor& hidden, int64_t t_dec) const;
  const layers::Embedding& output_table() const { return c_.tie_word_embeddings ? *shared_ : *lm_head_; }

  std::shared_ptr<layers::Embedding> shared_, lm_head_, enc_table_, dec_table_;
  std::vector<std::shared_ptr<layers::TransformerBlock>> blocks_;  // by layer (shape-only where another rank holds it)
  std::shared_ptr<layers::RMSNorm> enc_final_norm_, dec_final_norm_;
};

}  // namespace mf::models
