#include "meshflow/models/gpt_neox/model.h"

#include "meshflow/ops/ops.h"

namespace mf::models {

namespace {

// GPT-NeoX's block: input_layernorm and post_attention_layernorm, attention.query_key_value
// (per-head q, k, v) and attention.dense, mlp.dense_h_to_4h and mlp.dense_4h_to_h.
layers::BlockSpec gpt_neox_block_spec(const GptNeoxConfig& c) {
  using layers::BlockPart;
  layers::BlockSpec s{.norm = layers::NormKind::kLayerNorm, .norm_eps = c.layernorm_epsilon,
                      .residual = c.use_parallel_residual ? layers::Residual::kParallel : layers::Residual::kPreNorm,
                      .dropout_p = c.output_dropout_prob, .norm1 = "input_layernorm", .norm2 = "post_attention_layernorm",
                      .order = {BlockPart::kNorm1, BlockPart::kNorm2, BlockPart::kAttention, BlockPart::kMlp}};
  s.attention = {.hidden = c.hidden_size, .heads = c.num_attention_heads, .qkv = layers::QkvLayout::kFusedPerHead,
                 .rotary_inv_freq = rope_inv_freq(c.rotary_dims(), c.rope_theta), .rotary_dims = c.rotary_dims(),
                 .dropout_p = c.attention_dropout_prob, .fused = "attention.query_key_value", .out = "attention.dense"};
  s.mlp = {.hidden = c.hidden_size, .ffn = c.ffn_hidden_size, .act = layers::Activation::kGelu,
           .up = "mlp.dense_h_to_4h", .down = "mlp.dense_4h_to_h"};
  return s;
}

}  // namespace

DecoderLmSpec decoder_spec(const GptNeoxConfig& c) {
  c.validate();
  DecoderLmSpec s = decoder_lm_spec("gpt_neox", c, gpt_neox_block_spec(c), c.settings);
  s.root = "gpt_neox";
  s.embed = "embed_in";
  s.final_norm = "final_layer_norm";
  s.head = "embed_out";
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.streams_per_layer = 3;  // attention, attention output and MLP output dropout
  return s;
}

}  // namespace mf::models
