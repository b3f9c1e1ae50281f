// GPT-NeoX (GPTNeoXForCausalLM, the Pythia suite): pre-LayerNorm blocks with a parallel residual
// (attention and MLP both read the block input) or a sequential one, a fused q, k, v projection
// stored head by head, rotary embeddings on the first rotary_pct of each head's features, an
// exact-GELU MLP, biases everywhere, an untied output projection (embed_out). Parameter names,
// shapes and layouts are Hugging Face's, so import/export is a plain mapping.
//
// A spec of the shared decoder (models/decoder_lm.h): the family is its block spec and its names.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "meshflow/models/decoder_lm.h"
#include "meshflow/models/gpt_neox/config.h"

namespace mf::models {

// GPT-NeoX's block: input_layernorm and post_attention_layernorm, attention.query_key_value
// (per-head q, k, v) and attention.dense, mlp.dense_h_to_4h and mlp.dense_4h_to_h.
layers::BlockSpec gpt_neox_block_spec(const GptNeoxConfig& c);

class GptNeoxModel : public DecoderLm {
 public:
  explicit GptNeoxModel(const GptNeoxConfig& c, const ModelContext& ctx = {});

  Config model_config() const override { return gpt_neox_model_config(c_); }
  std::string describe() const override { return gpt_neox_describe(c_); }
  const GptNeoxConfig& config() const { return c_; }

 private:
  GptNeoxConfig c_;
};

}  // namespace mf::models
