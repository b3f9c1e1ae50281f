// GPT-NeoX (GPTNeoXForCausalLM, the Pythia suite): pre-LayerNorm blocks with a parallel residual
// (attention and MLP both read the block input) or a sequential one, a fused q, k, v projection
// stored head by head, rotary embeddings on the first rotary_pct of each head's features, an
// exact-GELU MLP, biases everywhere, an untied output projection (embed_out). Parameter names,
// shapes and layouts are Hugging Face's, so import/export is a plain mapping.
//
// A spec of the shared decoder (models/decoder_lm.h): the family is its block spec and its names.
#pragma once
#include "meshflow/models/decoder_lm.h"
#include "meshflow/models/gpt_neox/config.h"

namespace mf::models {

// The decoder's spec: embed_in, the blocks, final_layer_norm and an untied embed_out.
DecoderLmSpec decoder_spec(const GptNeoxConfig& c);
using GptNeoxModel = DecoderModel<GptNeoxConfig>;

}  // namespace mf::models
