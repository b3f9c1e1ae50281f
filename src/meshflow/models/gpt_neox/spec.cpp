#include "meshflow/models/gpt_neox/spec.h"

#include "meshflow/models/gpt_neox/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::gpt_neox {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
GptNeoxConfig sizes(const Config& c) { return gpt_neox_config(c, 0); }

}  // namespace

ModelSpec spec() {
  ModelSpec s = family_spec<GptNeoxModel>("gpt_neox", &gpt_neox_config, gpt_neox_schema());
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // The block (layers/block.h): the block input (and, sequential, the post-attention residual),
    // both LayerNorms' mean and inverse deviation (sequence); both LayerNorm outputs (gathered);
    // the fused q|k|v, the rotated q and k, the attention output, row log-sum-exp per head, the
    // MLP's input projection and its GELU (split).
    const GptNeoxConfig g = sizes(c);
    const double C = static_cast<double>(g.hidden_size), F = static_cast<double>(g.ffn_hidden_size);
    const double heads = static_cast<double>(g.num_attention_heads);
    const double residual = g.use_parallel_residual ? C : 2 * C;
    return LayerActivations{residual + 4, 2 * C, 6 * C + 2 * F + heads, heads};
  };
  s.checkpoint_config = checkpoint_config_from_run<GptNeoxConfig>(
      "GPT-NeoX", "the head count and the rotary share do", &sizes,
      [](const GptNeoxConfig&) { return std::string("gpt_neox.embed_in.weight"); });
  s.hf = hf();
  return s;
}

}  // namespace mf::models::gpt_neox
