// The Llama family (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM): pre-RMSNorm
// blocks of grouped-query attention with rotary position embeddings (rotate-half layout) and a
// SwiGLU MLP, no biases but Qwen2's on q, k and v, an output projection tied to the token
// embedding or not, Mistral's sliding-window attention. Parameter names, shapes and layouts are
// Hugging Face's ("model.layers.0.self_attn.q_proj.weight" is (heads * head_dim, hidden), the
// nn.Linear layout), so import/export is a plain mapping.
//
// Written once, on global tensors (layers/layers.h): q, k, v and the MLP's gate and up
// projections split their output features (whole heads for q, k, v; k and v stay whole when the
// ranks do not divide the key/value heads), o and down their input features; the embedding and an
// untied output projection split the vocabulary.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/layers/layers.h"
#include "meshflow/models/llama/config.h"
#include "meshflow/models/model.h"

namespace mf::models {

class LlamaBlock : public nn::Module {
 public:
  LlamaBlock(const LlamaConfig& c, const layers::Place& place);
  // (B, T, C) -> (B, T, C). recompute_attention: checkpoint the attention core (from q, k, v to
  // its output) when grad mode is on. decode: attend to the cached keys and values of layer
  // `layer` too (the positions before x's, x's appended), rotating by each row's positions;
  // key_padding: bool (B, keys), true = padding.
  GlobalTensor forward(const GlobalTensor& x, bool recompute_attention = false, const DecodeState* decode = nullptr,
                       int64_t layer = 0, const Tensor& key_padding = Tensor()) const;

 private:
  // x (B, T, C) -> (B, heads, T, D): a projection's heads, rotated when `rotate` (by each row's
  // positions when decoding).
  GlobalTensor heads(const layers::Linear& proj, const GlobalTensor& x, int64_t n, bool rotate,
                     const DecodeState* decode) const;

  LlamaConfig c_;
  std::vector<double> inv_freq_;
  std::shared_ptr<layers::RMSNorm> input_norm_, post_norm_;
  std::shared_ptr<layers::Linear> q_, k_, v_, o_, gate_, up_, down_;
};

class LlamaModel : public Model {
 public:
  explicit LlamaModel(const LlamaConfig& c, const ModelContext& ctx = {});
  // Hugging Face's initialisation: every projection and the embeddings N(0, initializer_range),
  // biases 0, RMSNorm weights 1. Parameter i draws from a generator of its own.
  void init_weights(uint64_t seed);
  // ids (B, T) -> logits (B, T, V): this rank's piece (split on the vocabulary when the output
  // projection is). Whole model only.
  Tensor logits(const Tensor& ids) const;

  DType activation_dtype(Device device) const override { return c_.activation_dtype(device); }
  DType param_dtype() const override { return c_.settings.dtype; }
  std::vector<std::pair<std::string, Shape>> parameter_shapes() const override { return llama_parameter_shapes(c_); }
  std::vector<std::string> tied_parameters() const override;
  // The embedding (id 0), block l (id 1 + l), the head (id num_layers + 1: the final norm and
  // the output projection).
  std::vector<nn::ParamUnit> parameter_units() const override;
  // 6 * (every parameter but the input embedding, a lookup) + 12 * layers * heads * head_dim *
  // seq (attention scores and values over the whole square, the PaLM/Megatron count).
  double flops_per_token(int64_t seq_len) const override;
  Config model_config() const override { return llama_model_config(c_); }
  bool generates() const override { return true; }
  int64_t max_sequence_length() const override { return c_.max_seq_length; }
  int64_t vocab_size() const override { return c_.vocab_size; }
  std::string describe() const override { return llama_describe(c_); }
  const LlamaConfig& config() const { return c_; }

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return norm_->forward(x); }
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  GlobalTensor output_logits(const GlobalTensor& hidden) const override;
  uint64_t streams_per_layer() const override { return 1; }  // the attention dropout
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override { return {rows, seq_len, c_.hidden_size}; }
  std::optional<CheckpointGranularity> recomputation(int64_t layer) const override;

 private:
  // The output projection: lm_head, or the token embedding when tied.
  const layers::Embedding& output_table() const { return lm_head_ ? *lm_head_ : *embed_tokens_; }

  LlamaConfig c_;
  std::shared_ptr<layers::Embedding> embed_tokens_, lm_head_;
  std::vector<std::shared_ptr<LlamaBlock>> blocks_;  // by layer; null: held by another rank
  std::shared_ptr<layers::RMSNorm> norm_;
};

}  // namespace mf::models
