// GPT-2: learned positions, pre-LayerNorm blocks, tied input/output embeddings, dropout.
// Parameter names and shapes follow Hugging Face's GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight" is (C, 3C)), so import/export is a plain mapping.
//
// Written once, on global tensors (layers/layers.h): the attention's fused QKV projection splits
// its weight's columns by whole heads, its output projection the rows; the MLP is columns then
// rows; the tied embedding splits the vocabulary, and the loss head's logits come out split on
// it. On one rank every layer is the plain one.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/models/gpt2/config.h"
#include "meshflow/models/model.h"
#include "meshflow/layers/block.h"

namespace mf::models {

// GPT-2's block as a spec of the shared one (layers/block.h): pre-LayerNorm, a fused q|k|v Conv1D
// (attn.c_attn) and attn.c_proj, a tanh-GELU MLP (mlp.c_fc, mlp.c_proj), dropout on both outputs.
layers::BlockSpec gpt2_block_spec(const Gpt2Config& c);

class Gpt2Block : public layers::TransformerBlock {
 public:
  Gpt2Block(const Gpt2Config& c, const layers::Place& place) : TransformerBlock(gpt2_block_spec(c), place, c.dtype) {}
};

// The parameters this rank holds keep the whole model's names; the head is tied to wte (a
// rank holding the head but not the embedding holds a copy of wte: the trainer keeps the copies'
// gradients summed, tied_parameters()).
class Gpt2Model : public Model {
 public:
  // Random streams: stream 0 for the embedding dropout, 1 + 3 l onwards for block l.
  static constexpr uint64_t kStreamsPerBlock = 3;

  // Throws when the layers this rank holds are out of range, and (its split layers' check) when
  // the ranks splitting the layers do not divide the heads or the MLP width, naming the config
  // keys.
  explicit Gpt2Model(const Gpt2Config& c, const ModelContext& ctx = {});
  // GPT-2 initialisation: N(0, initializer_range), output projections scaled by
  // 1/sqrt(2 * num_layers), biases 0, LayerNorm 1/0. Parameter i draws from stream i of a
  // generator of its own, so values depend only on (seed, parameter order, position).
  void init_weights(uint64_t seed);
  // ids (B, T) integer -> logits (B, T, V): this rank's piece of them (split on the vocabulary
  // when the embedding is). Whole model only.
  Tensor logits(const Tensor& ids) const;

  DType activation_dtype(Device device) const override { return c_.activation_dtype(device); }
  DType param_dtype() const override { return c_.dtype; }
  std::vector<std::pair<std::string, Shape>> parameter_shapes() const override { return gpt2_parameter_shapes(c_); }
  std::vector<std::string> tied_parameters() const override { return {"transformer.wte.weight"}; }
  // The embeddings (id 0: wte, wpe), block l (id 1 + l), the head (id num_layers + 1: ln_f and
  // the tied wte).
  std::vector<nn::ParamUnit> parameter_units() const override;
  // 6 * non-embedding-lookup params + 12 * layers * hidden * seq (attention scores and values,
  // the PaLM/Megatron count).
  double flops_per_token(int64_t seq_len) const override;
  Config model_config() const override { return gpt2_model_config(c_); }
  bool generates() const override { return true; }
  int64_t max_sequence_length() const override { return c_.max_seq_length; }
  int64_t vocab_size() const override { return c_.vocab_size; }
  std::string describe() const override;

  // The tied embedding's copy this rank holds, or an undefined tensor.
  Tensor embedding_weight() const;
  const Gpt2Config& config() const { return c_; }

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return ln_f_->forward(x); }
  // Logits are computed for chunks of rows (Gpt2Config::head_chunk_elements), each recomputed in
  // backward under full activation checkpointing.
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  GlobalTensor output_logits(const GlobalTensor& hidden) const override;
  uint64_t streams_per_layer() const override { return kStreamsPerBlock; }
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override { return {rows, seq_len, c_.hidden_size}; }
  std::optional<CheckpointGranularity> recomputation(int64_t layer) const override;

 private:
  Gpt2Config c_;
  std::shared_ptr<layers::Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<Gpt2Block>> blocks_;  // by layer; null: held by another rank
  std::shared_ptr<layers::LayerNorm> ln_f_;
};

}  // namespace mf::models
