#include "meshflow/models/llama/model.h"

namespace mf::models {

namespace {

// The Llama family's block as a spec of the shared one (layers/block.h): pre-RMSNorm
// (input_layernorm, post_attention_layernorm), self_attn.{q,k,v,o}_proj with grouped-query heads,
// rotary embeddings and the sliding window, a SwiGLU MLP (mlp.{gate,up,down}_proj).
layers::BlockSpec llama_block_spec(const LlamaConfig& c) {
  layers::BlockSpec s{.norm = layers::NormKind::kRMSNorm, .norm_eps = c.layernorm_epsilon, .norm1 = "input_layernorm",
                      .norm2 = "post_attention_layernorm"};
  s.attention = {.hidden = c.hidden_size, .heads = c.num_attention_heads, .kv_heads = c.kv_heads(), .head_dim = c.dim(),
                 .qkv_bias = c.qkv_bias, .out_bias = false, .rotary_inv_freq = c.rope_inv_freq(),
                 .window = c.sliding_window, .dropout_p = c.attention_dropout_prob, .q = "self_attn.q_proj",
                 .k = "self_attn.k_proj", .v = "self_attn.v_proj", .out = "self_attn.o_proj"};
  s.mlp = {.hidden = c.hidden_size, .ffn = c.ffn_hidden_size, .act = layers::Activation::kSilu, .gated = true,
           .bias = false, .gate = "mlp.gate_proj", .up = "mlp.up_proj", .down = "mlp.down_proj"};
  return s;
}

}  // namespace

DecoderLmSpec decoder_spec(const LlamaConfig& c) {
  c.validate();
  DecoderLmSpec s = decoder_lm_spec(llama_variant_name(c.variant), c, llama_block_spec(c), c.settings);
  s.tie_word_embeddings = c.tie_word_embeddings;
  return s;
}

}  // namespace mf::models
