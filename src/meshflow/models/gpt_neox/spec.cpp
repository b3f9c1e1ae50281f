#include "meshflow/models/gpt_neox/spec.h"

#include "meshflow/models/gpt_neox/hf.h"
#include "meshflow/models/gpt_neox/model.h"

namespace mf::models::gpt_neox {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
GptNeoxConfig sizes(const Config& c) { return gpt_neox_config(c, 0); }

Config checkpoint_config(const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
  MF_CHECK(run != nullptr, source, ": a GPT-NeoX checkpoint needs the run's config.yaml (or a Hugging Face "
           "config.json) beside it: the head count and the rotary share do not show in the tensors");
  GptNeoxConfig c = sizes(*run);
  for (const auto& [name, t] : tensors)  // the tokenizer may have padded model.vocab_size
    if (name == "gpt_neox.embed_in.weight" && t.ndim() == 2) c.vocab_size = t.shape(0);
  return gpt_neox_model_config(c);
}

}  // namespace

ModelSpec spec() {
  ModelSpec s;
  s.name = "gpt_neox";
  s.build = [](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<GptNeoxModel>(gpt_neox_config(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
  s.config_keys = {"model.name",          "model.num_layers",         "model.hidden_size",
                   "model.num_attention_heads", "model.ffn_hidden_size", "model.max_seq_length",
                   "model.vocab_size",    "model.layernorm_epsilon",  "model.rotary_pct",
                   "model.rope_theta",    "model.use_parallel_residual", "model.tie_word_embeddings",
                   "model.embedding_dropout_prob", "model.attention_dropout_prob", "model.output_dropout_prob",
                   "model.initializer_range"};
  // What the tensors' shapes do not show.
  s.structure_keys = {"model.num_attention_heads", "model.layernorm_epsilon", "model.rotary_pct", "model.rope_theta",
                      "model.use_parallel_residual", "model.tie_word_embeddings"};
  s.parameter_shapes = [](const Config& c) { return gpt_neox_parameter_shapes(sizes(c)); };
  s.describe = [](const Config& c) { return gpt_neox_describe(sizes(c)); };
  s.layer_activations = [](const Config& c) {
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
  s.checkpoint_config = checkpoint_config;
  s.hf.model_type = "gpt_neox";
  s.hf.architecture = "GPTNeoXForCausalLM";
  s.hf.read_config = [](const std::string& path) { return gpt_neox_model_config(gpt_neox_config_from_hf(path)); };
  s.hf.write_config = [](const Config& c, DType dtype) { return gpt_neox_config_to_hf(sizes(c), dtype); };
  s.hf.read_tensors = [](const io::HfModelFiles& files) {
    return read_hf_gpt_neox_tensors(files, gpt_neox_config_from_hf(files.config));
  };
  s.hf.key_names = {{"model.num_layers", "num_hidden_layers"},
                    {"model.hidden_size", "hidden_size"},
                    {"model.num_attention_heads", "num_attention_heads"},
                    {"model.ffn_hidden_size", "intermediate_size"},
                    {"model.max_seq_length", "max_position_embeddings"},
                    {"model.vocab_size", "vocab_size"},
                    {"model.layernorm_epsilon", "layer_norm_eps"},
                    {"model.rotary_pct", "rotary_pct"},
                    {"model.rope_theta", "rotary_emb_base"},
                    {"model.use_parallel_residual", "use_parallel_residual"},
                    {"model.tie_word_embeddings", "tie_word_embeddings"}};
  return s;
}

}  // namespace mf::models::gpt_neox
