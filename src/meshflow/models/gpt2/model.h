// GPT-2: learned positions, pre-LayerNorm blocks, tied input/output embeddings, dropout.
// Parameter names and shapes follow Hugging Face's GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight" is (C, 3C)), so import/export is a plain mapping.
//
// Tensor parallelism (parallel/layers.h) is a constructor argument, not another model: the
// attention's fused QKV projection is column-parallel by heads (each rank computes H / tp whole
// heads), its output projection row-parallel; the MLP is column then row; the tied embedding is
// vocabulary-parallel and the loss a vocabulary-parallel cross-entropy, so the full logits never
// exist on one rank. On one rank every layer is the plain one.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/models/gpt2/config.h"
#include "meshflow/models/model.h"
#include "meshflow/nn/layers.h"
#include "meshflow/parallel/layers.h"

namespace mf::models {

class Gpt2Block : public nn::Module {
 public:
  Gpt2Block(const Gpt2Config& c, const nn::TensorParallel& tp);
  // (B, T, C) -> (B, T, C), B on tp; sequence parallel: (B, T / tp, C) S(1) pieces of a
  // sequence of seq_len. recompute_attention: checkpoint the attention core (selective
  // checkpointing) when grad mode is on.
  Tensor forward(const Tensor& x, int64_t seq_len = 0, bool recompute_attention = false) const;

 private:
  Gpt2Config c_;
  nn::TensorParallel tp_;
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<parallel::ColumnConv1D> c_attn_, c_fc_;
  std::shared_ptr<parallel::RowConv1D> attn_proj_, mlp_proj_;
};

// A pipeline stage of GPT-2 holds blocks [first_layer, end_layer); the first stage also holds
// the embeddings, the last ln_f and the head (tied to wte, which it holds a copy of: the trainer
// keeps the two copies' gradients summed, tied_parameters()). Parameter names stay the whole
// model's.
class Gpt2Model : public Model {
 public:
  // Random streams: a forward uses streams [s0, s0 + streams_per_forward()) of the default
  // generator at fixed places — s0 for the embedding dropout, s0 + 1 + 3 l onwards for block l —
  // so a pipeline stage running some blocks draws exactly what the whole model draws there.
  static constexpr uint64_t kStreamsPerBlock = 3;

  // Throws when the stage's layers are out of range, and (its split layers' check) when tp does
  // not divide the heads or the MLP width, naming the config keys.
  explicit Gpt2Model(const Gpt2Config& c, const nn::TensorParallel& tp = {}, const PipelineStage& stage = {});
  // GPT-2 initialisation: N(0, initializer_range), output projections scaled by
  // 1/sqrt(2 * num_layers), biases 0, LayerNorm 1/0. Parameter i draws from stream i of a
  // generator of its own, so values depend only on (seed, parameter order, position).
  void init_weights(uint64_t seed);
  // ids (B, T) integer -> logits (B, T, V); under tensor parallelism this rank's vocabulary
  // columns (B, T, V / tp). Whole model only.
  Tensor logits(const Tensor& ids) const;

  // The first stage takes ids (B, T), the others the previous stage's output; returns the
  // activation for the next stage (B, T, C) — (B, T / tp, C) pieces under sequence parallelism —
  // or, on the last stage, the final hidden state (B, T, C). `chunk`: the embeddings run before
  // chunk 0 on the first stage, the head's ln_f after the last chunk on the last stage.
  Tensor stage_forward(const Tensor& input, uint64_t stream0, int64_t seq_len, int64_t chunk = 0) const override;
  // The loss of the final hidden state (B, T, C) against labels (B, T). Logits are computed for
  // chunks of rows (Gpt2Config::head_chunk_elements), each recomputed in backward under full
  // activation checkpointing.
  Tensor head_loss(const Tensor& hidden, const Tensor& labels) const override;
  uint64_t streams_per_forward() const override { return 1 + kStreamsPerBlock * static_cast<uint64_t>(c_.num_layers); }
  Shape activation_shape(int64_t rows, int64_t seq_len) const override;
  DType activation_dtype(Device device) const override { return c_.activation_dtype(device); }
  DType param_dtype() const override { return c_.dtype; }
  std::vector<std::pair<std::string, Shape>> parameter_shapes() const override { return gpt2_parameter_shapes(c_); }
  std::vector<std::string> tied_parameters() const override { return {"transformer.wte.weight"}; }
  // The embeddings (id 0, first stage: wte, wpe), block l (id 1 + l), the head (id num_layers +
  // 1, last stage: ln_f and the tied wte).
  std::vector<nn::ParamUnit> parameter_units() const override;
  // 6 * non-embedding-lookup params + 12 * layers * hidden * seq (attention scores and values,
  // the PaLM/Megatron count).
  double flops_per_token(int64_t seq_len) const override;
  Config model_config() const override { return gpt2_model_config(c_); }
  std::string describe() const override;

  // The tied embedding's copy on this stage (first and/or last), or an undefined tensor.
  Tensor embedding_weight() const;
  const Gpt2Config& config() const { return c_; }

 private:
  Gpt2Config c_;
  nn::TensorParallel tp_;
  std::shared_ptr<nn::Module> transformer_;
  std::shared_ptr<parallel::VocabParallelEmbedding> wte_;
  std::shared_ptr<nn::Embedding> wpe_;
  std::vector<std::shared_ptr<Gpt2Block>> blocks_;       // every chunk's, in layer order
  std::vector<std::pair<int64_t, int64_t>> chunk_layers_;  // per chunk: its [first, end) layers
  std::shared_ptr<nn::LayerNorm> ln_f_;
  int64_t head_unit() const { return c_.num_layers + 1; }
};

}  // namespace mf::models
