#include "meshflow/models/gpt2/model.h"

namespace mf::models {

layers::BlockSpec gpt2_block_spec(const Gpt2Config& c) {
  layers::BlockSpec s;
  layers::AttentionSpec& a = s.attention;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.qkv = layers::QkvLayout::kFusedBlocks;
  a.weights = layers::WeightLayout::kConv1D;
  a.dropout_p = c.attention_dropout_prob;
  a.fused = "attn.c_attn";
  a.out = "attn.c_proj";
  layers::MlpSpec& m = s.mlp;
  m.hidden = c.hidden_size;
  m.ffn = c.ffn();
  m.act = layers::Activation::kGeluTanh;
  m.weights = layers::WeightLayout::kConv1D;
  m.up = "mlp.c_fc";
  m.down = "mlp.c_proj";
  s.norm = layers::NormKind::kLayerNorm;
  s.norm_eps = c.layernorm_epsilon;
  s.dropout_p = c.output_dropout_prob;
  s.norm1 = "ln_1";
  s.norm2 = "ln_2";
  return s;
}

namespace {
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
}  // namespace

Gpt2Model::Gpt2Model(const Gpt2Config& c, const ModelContext& ctx) : DecoderLm(decoder_spec(c), ctx), c_(c) {}

std::string Gpt2Model::describe() const { return gpt2_describe(c_); }

}  // namespace mf::models
