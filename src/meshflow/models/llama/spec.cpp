#include "meshflow/models/llama/spec.h"

#include "meshflow/models/llama/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::llama {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
LlamaConfig sizes(const Config& c) { return llama_config(c, 0); }

ModelSpec spec(LlamaVariant variant) {
  ModelSpec s = family_spec<LlamaModel>(llama_variant_name(variant), &llama_config, llama_schema());
  // What the tensors' shapes do not show, beyond the schema's: rope_scaling (read by hand).
  for (const char* k : {"model.rope_scaling.type", "model.rope_scaling.factor", "model.rope_scaling.low_freq_factor",
                        "model.rope_scaling.high_freq_factor", "model.rope_scaling.original_max_position_embeddings"})
    s.structure_keys.emplace_back(k);
  // The scaling's numbers count only under rope_scaling.type llama3.
  s.structure_key_applies = [](const Config& weights, const std::string& key) {
    return key.rfind("model.rope_scaling.", 0) != 0 || key == "model.rope_scaling.type" ||
           weights.get_string("model.rope_scaling.type") == "llama3";
  };
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // LlamaBlock::forward: the block input and the post-attention residual, and both RMSNorms'
    // inverse root mean square (sequence); both RMSNorm outputs (gathered); the rotated q, k and v
    // the attention keeps, its output and row log-sum-exp per head, and the gated MLP's gate, its
    // SiLU, up and their product (split).
    const LlamaConfig l = sizes(c);
    const double q = static_cast<double>(l.num_attention_heads * l.dim()), kv = static_cast<double>(l.kv_heads() * l.dim());
    const double C = static_cast<double>(l.hidden_size), F = static_cast<double>(l.ffn_hidden_size);
    const double heads = static_cast<double>(l.num_attention_heads);
    return LayerActivations{2 * C + 2, 2 * C, 2 * q + 2 * kv + 4 * F + heads, heads};
  };
  s.checkpoint_config = checkpoint_config_from_run<LlamaConfig>(
      "Llama-family", "the head counts do", &sizes,
      [](const LlamaConfig&) { return std::string("model.embed_tokens.weight"); });
  s.hf = hf(variant);
  return s;
}

}  // namespace

ModelSpec llama_spec() { return spec(LlamaVariant::kLlama); }
ModelSpec qwen2_spec() { return spec(LlamaVariant::kQwen2); }
ModelSpec mistral_spec() { return spec(LlamaVariant::kMistral); }

}  // namespace mf::models::llama
