// The Llama family (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM): pre-RMSNorm
// blocks of grouped-query attention with rotary position embeddings (rotate-half layout) and a
// SwiGLU MLP, no biases but Qwen2's on q, k and v, an output projection tied to the token
// embedding or not, Mistral's sliding-window attention. Parameter names, shapes and layouts are
// Hugging Face's ("model.layers.0.self_attn.q_proj.weight" is (heads * head_dim, hidden), the
// nn.Linear layout), so import/export is a plain mapping.
//
// Written once, on global tensors (layers/layers.h): q, k, v and the MLP's gate and up
// projections split their output features (whole heads for q, k, v; k and v stay whole when the
// ranks do not divide the key/value heads), o and down their input features; the embedding and an
// untied output projection split the vocabulary.
#pragma once
#include "meshflow/models/llama/config.h"
#include "meshflow/models/decoder_lm.h"

namespace mf::models {

// The decoder's spec: model.embed_tokens, the blocks, model.norm and lm_head (or the embedding, tied).
DecoderLmSpec decoder_spec(const LlamaConfig& c);
using LlamaModel = DecoderModel<LlamaConfig>;

}  // namespace mf::models
