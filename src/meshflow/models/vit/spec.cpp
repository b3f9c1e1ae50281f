#include "meshflow/models/vit/spec.h"

#include <cmath>

#include "meshflow/models/spec_builder.h"
#include "meshflow/models/vit/model.h"

namespace mf::models::vit {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
VitConfig sizes(const Config& c) { return vit_config(c); }

Config checkpoint_config(const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
  MF_CHECK(run != nullptr, source, ": a ViT checkpoint needs the run's config.yaml (or a Hugging Face config.json) "
           "beside it: the head count does not show in the tensors");
  (void)tensors;
  return model_config(sizes(*run));
}

// Weights of another image size: their position embeddings interpolated to the model's grid.
std::string adapt_weights(const Config& model, nn::NamedTensors& tensors) {
  const VitConfig c = sizes(model);
  for (auto& [name, t] : tensors) {
    if (name != "vit.embeddings.position_embeddings" || t.ndim() != 3 || t.shape(1) == c.sequence_length()) continue;
    const int64_t from = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(t.shape(1) - 1))));
    // bf16/f16 weights interpolate to f32 (the load then casts to the model's dtype, once).
    t = vit_interpolate_positions(is_half(t.dtype()) ? cast(t, DType::kF32) : t, c.grid());
    return detail::cat("position embeddings interpolated from ", from, "x", from, " to ", c.grid(), "x", c.grid(),
                       " patches (bicubic)");
  }
  return "";
}

}  // namespace

ModelSpec vit_spec() {
  ModelSpec s = family_spec<VitModel>("vit", &vit_config, vit_schema());
  s.head_prefixes = {"classifier."};
  s.sequence_length = [](const Config& c) { return sizes(c).sequence_length(); };
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // The pre-norm block (layers/block.h), as GPT-2's: the block input and the post-attention
    // residual with both LayerNorms' statistics (sequence); both LayerNorm outputs (gathered);
    // q, k, v, the attention output, the MLP's input projection and its GELU, the row
    // log-sum-exp per head (split).
    const VitConfig v = sizes(c);
    const double C = static_cast<double>(v.hidden_size), F = static_cast<double>(v.ffn_hidden_size);
    const double heads = static_cast<double>(v.num_attention_heads);
    return LayerActivations{2 * C + 4, 2 * C, 4 * C + 2 * F + heads, heads};
  };
  s.checkpoint_config = checkpoint_config;
  s.adapt_weights = adapt_weights;
  s.hf = hf();
  return s;
}

}  // namespace mf::models::vit
