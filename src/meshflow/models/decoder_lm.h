// A decoder-only causal language model assembled from specs: a token embedding, one shared
// Transformer block per layer (layers/block.h, configured by the family's BlockSpec), a final
// norm and an output projection tied to the embedding or not. A family (Llama, Qwen2, Mistral,
// GPT-NeoX) is a DecoderLmSpec — its Hugging Face names and its block — plus its config and
// Hugging Face files; this class is the model code they share.
//
// Written once, on global tensors: the embedding and an untied output projection split the
// vocabulary; the blocks split heads and the MLP width (layers/attention.h, layers/mlp.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/layers/block.h"
#include "meshflow/models/model.h"

namespace mf::models {

struct DecoderLmSpec {
  std::string family;  // named in errors: "llama: sequence length ..."
  // Hugging Face's names: <root>.<embed>, <root>.<layers>.<l>., <root>.<final_norm>, and the
  // untied output projection <head> (outside the root); an empty root: <embed>, <layers>.<l>., ...
  std::string root = "model", embed = "embed_tokens", layers = "layers", final_norm = "norm", head = "lm_head";
  // A learned position table <root>.<positions> added to the token embedding (GPT-2's wpe); none
  // when empty.
  std::string positions;
  double embedding_dropout = 0.0;  // on the embedding's output (after the positions), in training; rounded
  // max_seq_length 0: no limit (a model without positions of any kind).
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, max_seq_length = 0;
  bool generates = true;  // meshflow generate / serve take it (its blocks keep a key/value cache)
  bool tie_word_embeddings = false;
  layers::NormKind final_norm_kind = layers::NormKind::kRMSNorm;
  double final_norm_eps = 1e-6;
  layers::BlockSpec block;  // every layer's
  double initializer_range = 0.02;
  // Parameter-name suffixes drawn with initializer_range / sqrt(2 num_layers) (GPT-2's output
  // projections, "c_proj.weight").
  std::vector<std::string> scaled_init;
  TrainingSettings settings;
  int64_t head_chunk_elements = int64_t{1} << 24;  // the loss head's logits per chunk
  uint64_t streams_per_layer = 1;                  // the attention dropout
};

// What every decoder's config gives: its sizes, its block, a final norm of the block's kind and
// epsilon, initialisation, training settings and the loss head's chunk; the names keep their
// defaults.
template <class C>
DecoderLmSpec decoder_lm_spec(std::string family, const C& c, layers::BlockSpec block, TrainingSettings settings) {
  DecoderLmSpec s;
  s.family = std::move(family);
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.num_layers = c.num_layers;
  s.max_seq_length = c.max_seq_length;
  s.final_norm_kind = block.norm;
  s.final_norm_eps = block.norm_eps;
  s.block = std::move(block);
  s.initializer_range = c.initializer_range;
  s.settings = settings;
  s.head_chunk_elements = c.head_chunk_elements;
  return s;
}

// What the run's training settings make of a model's recomputation and dtype (the spec's settings).
TrainingSettings decoder_settings(DType dtype, bool recompute, CheckpointGranularity granularity, int64_t start_layer,
                                  int64_t end_layer);

class DecoderLm : public Model {
 public:
  // Throws (the blocks' checks) naming the config key the ranks splitting the layers do not divide.
  DecoderLm(DecoderLmSpec spec, const ModelContext& ctx);
  // Hugging Face's initialisation: every projection and the embeddings N(0, initializer_range)
  // (the scaled_init ones divided by sqrt(2 num_layers)), biases 0, norm weights (the 1-D
  // weights) 1. Parameter i (of parameter_shapes()'s order) draws from a generator of its own,
  // whatever rank holds it.
  void init_weights(uint64_t seed);
  // ids (B, T) -> logits (B, T, V): this rank's piece (split on the vocabulary when the output
  // projection is). Whole model only.
  Tensor logits(const Tensor& ids) const;

  DType activation_dtype(Device device) const override;
  DType param_dtype() const override { return s_.settings.dtype; }
  std::vector<std::string> tied_parameters() const override;
  // The embedding (id 0), block l (id 1 + l), the head (id num_layers + 1: the final norm and
  // the output projection).
  std::vector<nn::ParamUnit> parameter_units() const override;
  // 6 * (every parameter but the lookups: an untied input embedding, a position table) + 12 *
  // layers * heads * head_dim * seq (attention scores and values over the whole square, the
  // PaLM/Megatron count).
  double flops_per_token(int64_t seq_len) const override;
  bool generates() const override { return s_.generates; }
  int64_t max_sequence_length() const override { return s_.max_seq_length; }
  int64_t vocab_size() const override { return s_.vocab_size; }

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return norm_->forward(x); }
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  GlobalTensor output_logits(const GlobalTensor& hidden) const override;
  uint64_t streams_per_layer() const override { return s_.streams_per_layer; }
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override { return {rows, seq_len, s_.hidden_size}; }
  std::optional<CheckpointGranularity> recomputation(int64_t layer) const override;

 private:
  // The output projection: the head, or the token embedding when tied.
  const layers::Embedding& output_table() const { return head_ ? *head_ : *embed_; }
  // A part's parameter name under the root ("model.norm.weight"; "norm.weight" without a root).
  std::string rooted(const std::string& name) const;

  DecoderLmSpec s_;
  std::shared_ptr<layers::Embedding> embed_, positions_, head_;
  std::vector<std::shared_ptr<layers::TransformerBlock>> blocks_;  // by layer (shape-only where another rank holds it)
  std::shared_ptr<layers::Norm> norm_;
};

// The decoder of config struct C: decoder_spec(C), declared beside C (argument-dependent lookup),
// makes its spec; its model.* keys and description come from C as ConfiguredModel's do.
template <class C>
DecoderLmSpec decoder_spec_of(const C& c) {
  return decoder_spec(c);
}
template <class C>
class DecoderModel final : public DecoderLm {
 public:
  explicit DecoderModel(const C& c, const ModelContext& ctx = {}) : DecoderLm(decoder_spec_of(c), ctx), c_(c) {}

  Config model_config() const override { return model_keys_of(c_); }
  std::string describe() const override { return description_of(c_); }
  const C& config() const { return c_; }

 private:
  C c_;
};

}  // namespace mf::models
