// A micro-batch as the data gives it to a model, under Hugging Face's input names. Host tensors of
// i64 (the trainer keeps them on the host; the model uploads what it computes with). Which fields
// a model reads is its own: a causal language model input_ids and labels; BERT also
// token_type_ids, attention_mask and next_sentence_label; a sequence classifier class labels; an
// encoder-decoder (T5) input_ids and attention_mask for its encoder, decoder_input_ids and
// decoder_attention_mask for its decoder, and labels (B, T_dec) for the decoder's positions; an
// image classifier (ViT) pixel_values (B, 3, H, W) f32, normalised, and a class label per row.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "meshflow/layers/kv_cache.h"
#include "meshflow/tensor/tensor.h"

namespace mf::models {

// Decoding with a key/value cache (infer/engine.h): where this call's new positions sit and the
// caches of the layers. The batch is left-padded, so every row has `past` cached positions; row
// b's real tokens start at position 0, its padding before them at negative positions (masked by
// the batch's attention_mask, which covers the cached and the new positions: (B, past + T)).
struct DecodeState {
  int64_t past = 0;      // positions already in the caches
  int64_t capacity = 0;  // positions each cache holds
  std::vector<int64_t> row_start;             // (B) position of row b's first slot (-(its padding))
  std::vector<layers::KvCache>* caches = nullptr;  // by whole-model layer index

  // Row b's first new position: row_start[b] + past (rotary embeddings' per-row offsets), made
  // once per value of past, every layer reading the same.
  const std::vector<int64_t>& row_offsets() const;
  // The new positions (B, T) as an i64 host tensor, padding's clamped to 0 (a learned position
  // table's lookup; masked anyway).
  Tensor positions(int64_t new_tokens) const;
  // What layer `layer`'s attention reads of it (layers/attention.h): its cache, which the
  // attention fills with this call's keys and values.
  layers::LayerDecode layer(int64_t layer) const;

 private:
  mutable std::vector<int64_t> offsets_;
  mutable int64_t offsets_past_ = -1;  // the past offsets_ were made for
};

struct Batch {
  Batch() = default;
  Batch(Tensor ids, Tensor token_labels) : input_ids(std::move(ids)), labels(std::move(token_labels)) {}

  Tensor input_ids;            // (B, T)
  Tensor labels;               // (B, T) token labels (-100: not counted), or (B) class labels
  Tensor token_type_ids;       // (B, T) segment ids; undefined: all 0
  Tensor attention_mask;       // (B, T) 1 = a real token, 0 = padding; undefined: no padding
  Tensor next_sentence_label;  // (B) 0 = segment B continues A, 1 = random; undefined: none
  Tensor decoder_input_ids;       // (B, T_dec) encoder-decoder: the decoder's input (labels shifted right)
  Tensor decoder_attention_mask;  // (B, T_dec) 1 = a real decoder token, 0 = padding; undefined: none
  Tensor pixel_values;            // (B, channels, H, W) f32 images, normalised (mean/std); undefined: none
  const DecodeState* decode = nullptr;  // decoding: input_ids are the new positions (B, T) after the cached ones

  int64_t rows() const {
    return input_ids.defined() ? input_ids.shape(0) : pixel_values.defined() ? pixel_values.shape(0) : labels.shape(0);
  }
};

// `t` as a contiguous i64 host tensor (ids, labels and masks read on the host).
Tensor host_i64(const Tensor& t);
// Elements of `labels` that are not -100 (ignored), counted on the host.
int64_t counted_labels(const Tensor& labels);
// The keys padding hides from attention: attention_mask == 0, as a bool (B, T) host tensor;
// undefined when the batch has no attention_mask.
Tensor key_padding_mask(const Batch& batch);
// The same of any such mask (T5's decoder_attention_mask).
Tensor key_padding_mask(const Tensor& attention_mask);

}  // namespace mf::models
