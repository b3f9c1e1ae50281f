// GPT-2: learned positions, pre-LayerNorm blocks, tied input/output embeddings, dropout.
// Parameter names and shapes follow Hugging Face's GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight" is (C, 3C)), so import/export is a plain mapping.
//
// Written once, on global tensors (layers/layers.h): the attention's fused QKV projection splits
// its weight's columns by whole heads, its output projection the rows; the MLP is columns then
// rows; the tied embedding splits the vocabulary, and the loss head's logits come out split on
// it. On one rank every layer is the plain one.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/models/gpt2/config.h"
#include "meshflow/models/decoder_lm.h"

namespace mf::models {

// GPT-2's block as a spec of the shared one (layers/block.h): pre-LayerNorm, a fused q|k|v Conv1D
// (attn.c_attn) and attn.c_proj, a tanh-GELU MLP (mlp.c_fc, mlp.c_proj), dropout on both outputs.
layers::BlockSpec gpt2_block_spec(const Gpt2Config& c);

class Gpt2Block : public layers::TransformerBlock {
 public:
  Gpt2Block(const Gpt2Config& c, const layers::Place& place) : TransformerBlock(gpt2_block_spec(c), place, c.dtype) {}
};

// A DecoderLm (models/decoder_lm.h) of GPT-2's block with learned positions (transformer.wpe),
// embedding dropout and the output projection tied to transformer.wte (a rank holding the head
// but not the embedding holds a copy of wte: the trainer keeps the copies' gradients summed,
// tied_parameters()). Initialisation: N(0, initializer_range), output projections (c_proj)
// scaled by 1/sqrt(2 * num_layers), biases 0, LayerNorm 1/0. Random streams: stream 0 for the
// embedding dropout, 1 + 3 l onwards for block l (attention, attention output, MLP output).
// Building it throws when the ranks splitting the layers do not divide the heads or the MLP
// width, naming the config keys.
DecoderLmSpec decoder_spec(const Gpt2Config& c);
using Gpt2Model = DecoderModel<Gpt2Config>;

}  // namespace mf::models
