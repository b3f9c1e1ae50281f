#include "meshflow/models/gpt2/model.h"

namespace mf::models {

layers::BlockSpec gpt2_block_spec(const Gpt2Config& c) {
  using layers::WeightLayout;
  layers::BlockSpec s{.norm = layers::NormKind::kLayerNorm, .norm_eps = c.layernorm_epsilon,
                      .dropout_p = c.output_dropout_prob, .norm1 = "ln_1", .norm2 = "ln_2"};
  s.attention = {.hidden = c.hidden_size, .heads = c.num_attention_heads, .qkv = layers::QkvLayout::kFusedBlocks,
                 .weights = WeightLayout::kConv1D, .dropout_p = c.attention_dropout_prob, .fused = "attn.c_attn",
                 .out = "attn.c_proj"};
  s.mlp = {.hidden = c.hidden_size, .ffn = c.ffn(), .act = layers::Activation::kGeluTanh, .weights = WeightLayout::kConv1D,
           .up = "mlp.c_fc", .down = "mlp.c_proj"};
  return s;
}

DecoderLmSpec decoder_spec(const Gpt2Config& c) {
  c.validate();
  DecoderLmSpec s = decoder_lm_spec("gpt2", c, gpt2_block_spec(c),
                                    decoder_settings(c.dtype, c.activation_checkpointing, c.checkpoint_granularity,
                                                     c.checkpoint_start_layer, c.checkpoint_end_layer));
  s.root = "transformer";
  s.embed = "wte";
  s.positions = "wpe";
  s.layers = "h";
  s.final_norm = "ln_f";
  s.tie_word_embeddings = true;
  s.embedding_dropout = c.embedding_dropout_prob;
  s.scaled_init = {"c_proj.weight"};
  s.streams_per_layer = 3;  // attention, attention output and MLP output dropout
  return s;
}

}  // namespace mf::models
