#include "meshflow/models/gpt_neox/model.h"

#include "meshflow/ops/ops.h"

namespace mf::models {

layers::BlockSpec gpt_neox_block_spec(const GptNeoxConfig& c) {
  layers::BlockSpec s;
  layers::AttentionSpec& a = s.attention;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.qkv = layers::QkvLayout::kFusedPerHead;
  a.rotary_dims = c.rotary_dims();
  a.rotary_inv_freq = rope_inv_freq(a.rotary_dims, c.rope_theta);
  a.dropout_p = c.attention_dropout_prob;
  a.fused = "attention.query_key_value";
  a.out = "attention.dense";
  layers::MlpSpec& m = s.mlp;
  m.hidden = c.hidden_size;
  m.ffn = c.ffn_hidden_size;
  m.act = layers::Activation::kGelu;
  m.up = "mlp.dense_h_to_4h";
  m.down = "mlp.dense_4h_to_h";
  s.norm = layers::NormKind::kLayerNorm;
  s.norm_eps = c.layernorm_epsilon;
  s.residual = c.use_parallel_residual ? layers::Residual::kParallel : layers::Residual::kPreNorm;
  s.dropout_p = c.output_dropout_prob;
  s.norm1 = "input_layernorm";
  s.norm2 = "post_attention_layernorm";
  s.order = {layers::BlockPart::kNorm1, layers::BlockPart::kNorm2, layers::BlockPart::kAttention, layers::BlockPart::kMlp};
  return s;
}

namespace {
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
}  // namespace

GptNeoxModel::GptNeoxModel(const GptNeoxConfig& c, const ModelContext& ctx) : DecoderLm(decoder_spec(c), ctx), c_(c) {}

}  // namespace mf::models
