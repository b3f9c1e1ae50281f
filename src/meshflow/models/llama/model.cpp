#include "meshflow/models/llama/model.h"

namespace mf::models {

layers::BlockSpec llama_block_spec(const LlamaConfig& c) {
  layers::BlockSpec s;
  layers::AttentionSpec& a = s.attention;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.kv_heads();
  a.head_dim = c.dim();
  a.qkv_bias = c.qkv_bias;
  a.out_bias = false;
  a.rotary_inv_freq = c.rope_inv_freq();
  a.window = c.sliding_window;
  a.dropout_p = c.attention_dropout_prob;
  a.q = "self_attn.q_proj";
  a.k = "self_attn.k_proj";
  a.v = "self_attn.v_proj";
  a.out = "self_attn.o_proj";
  layers::MlpSpec& m = s.mlp;
  m.hidden = c.hidden_size;
  m.ffn = c.ffn_hidden_size;
  m.act = layers::Activation::kSilu;
  m.gated = true;
  m.bias = false;
  m.gate = "mlp.gate_proj";
  m.up = "mlp.up_proj";
  m.down = "mlp.down_proj";
  s.norm = layers::NormKind::kRMSNorm;
  s.norm_eps = c.rms_norm_eps;
  s.norm1 = "input_layernorm";
  s.norm2 = "post_attention_layernorm";
  return s;
}

namespace {
DecoderLmSpec decoder_spec(const LlamaConfig& c) {
  c.validate();
  DecoderLmSpec s = decoder_lm_spec(llama_variant_name(c.variant), c, llama_block_spec(c), c.settings);
  s.tie_word_embeddings = c.tie_word_embeddings;
  return s;
}
}  // namespace

LlamaModel::LlamaModel(const LlamaConfig& c, const ModelContext& ctx) : DecoderLm(decoder_spec(c), ctx), c_(c) {}

}  // namespace mf::models
