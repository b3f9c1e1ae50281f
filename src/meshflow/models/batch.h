// A micro-batch as the data gives it to a model, under Hugging Face's input names. Host tensors of
// i64 (the trainer keeps them on the host; the model uploads what it computes with). Which fields
// a model reads is its own: a causal language model input_ids and labels; BERT also
// token_type_ids, attention_mask and next_sentence_label; a sequence classifier class labels; an
// encoder-decoder (T5) input_ids and attention_mask for its encoder, decoder_input_ids and
// decoder_attention_mask for its decoder, and labels (B, T_dec) for the decoder's positions; an
// image classifier (ViT) pixel_values (B, 3, H, W) f32, normalised, and a class label per row.
#pragma once
#include <cstdint>

#include "meshflow/tensor/tensor.h"

namespace mf::models {

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

}  // namespace mf::models
