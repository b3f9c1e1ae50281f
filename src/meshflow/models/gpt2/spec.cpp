#include "meshflow/models/gpt2/spec.h"

#include "meshflow/models/gpt2/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::gpt2 {

namespace {

const Tensor* find_tensor(const nn::NamedTensors& t, const std::string& name, int64_t ndim) {
  for (const auto& [n, v] : t)
    if (n == name && v.ndim() == ndim) return &v;
  return nullptr;
}

// The sizes of a run config's model.* keys alone (no training settings).
Gpt2Config sizes(const Config& c) { return gpt2_config(c, 0); }

Config checkpoint_config(const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
  const Tensor* wte = find_tensor(tensors, "transformer.wte.weight", 2);
  MF_CHECK(wte != nullptr, source, ": no 2-D tensor 'transformer.wte.weight' (not a GPT-2 checkpoint)");
  Gpt2Config g;
  if (run) {
    g = sizes(*run);
  } else {  // the sizes the tensors show; one head (unknown)
    const Tensor* wpe = find_tensor(tensors, "transformer.wpe.weight", 2);
    const Tensor* fc = find_tensor(tensors, "transformer.h.0.mlp.c_fc.weight", 2);
    MF_CHECK(wpe != nullptr && fc != nullptr, source, ": no 2-D tensors 'transformer.wpe.weight' and "
             "'transformer.h.0.mlp.c_fc.weight' (not a GPT-2 checkpoint)");
    int64_t layers = 0;
    while (find_tensor(tensors, "transformer.h." + std::to_string(layers) + ".ln_1.weight", 1)) ++layers;
    g.hidden_size = wte->shape(1);
    g.max_seq_length = wpe->shape(0);
    g.num_layers = layers;
    g.ffn_hidden_size = fc->shape(1);
    g.num_attention_heads = 1;
  }
  g.vocab_size = wte->shape(0);  // the tokenizer may have padded model.vocab_size
  return model_config(g);
}

}  // namespace

ModelSpec spec() {
  ModelSpec s = family_spec<Gpt2Model>("gpt2", &gpt2_config, gpt2_schema());
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // Gpt2Block::forward: the block input and the post-attention residual, and both LayerNorms'
    // mean and inverse deviation (sequence); both LayerNorm outputs, the GEMMs' saved inputs
    // (gathered); q|k|v, the attention output (also c_proj's saved input), c_fc's output and its
    // GELU, and the attention's row log-sum-exp per head (split). Dropout keeps no mask (its bits
    // are drawn again), attention no scores; selective recomputation drops the log-sum-exp.
    const Gpt2Config g = sizes(c);
    const double C = static_cast<double>(g.hidden_size), F = static_cast<double>(g.ffn());
    const double heads = static_cast<double>(g.num_attention_heads);
    return LayerActivations{2 * C + 4, 2 * C, 4 * C + 2 * F + heads, heads};
  };
  s.checkpoint_config = checkpoint_config;
  s.hf = hf();
  return s;
}

}  // namespace mf::models::gpt2
