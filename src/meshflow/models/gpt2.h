// GPT-2: learned positions, pre-LayerNorm blocks, tied input/output embeddings, dropout.
// Parameter names and shapes follow Hugging Face's GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight" is (C, 3C)), so import/export is a plain mapping.
//
// Tensor parallelism (nn/parallel_layers.h) is a constructor argument, not another model: the
// attention's fused QKV projection is column-parallel by heads (each rank computes H / tp whole
// heads), its output projection row-parallel; the MLP is column then row; the tied embedding is
// vocabulary-parallel and the loss a vocabulary-parallel cross-entropy, so the full logits never
// exist on one rank. On one rank every layer is the plain one.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/nn/layers.h"
#include "meshflow/nn/parallel_layers.h"
#include "meshflow/nn/param_use_hooks.h"

namespace mf::models {

// Activation checkpointing granularity (train.activation_checkpoint.granularity). kFull recomputes
// whole blocks (and the loss head's logits); kSelective only each block's attention core, from
// q, k, v to the attention output (Megatron-LM's --recompute-granularity selective).
enum class CheckpointGranularity { kFull, kSelective };
// "full" or "selective"; throws naming the config key and the allowed values.
CheckpointGranularity parse_checkpoint_granularity(const std::string& name);

struct Gpt2Config {
  int64_t vocab_size = 50257;
  int64_t max_seq_length = 1024;  // n_positions
  int64_t hidden_size = 768;      // n_embd
  int64_t num_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t ffn_hidden_size = 0;  // 0: 4 * hidden_size
  double embedding_dropout_prob = 0.1;
  double attention_dropout_prob = 0.1;
  double output_dropout_prob = 0.1;
  double layernorm_epsilon = 1e-5;
  double initializer_range = 0.02;
  // Activation checkpointing: blocks [checkpoint_start_layer, checkpoint_end_layer) of the whole
  // model (end -1: num_layers) recompute in backward what `checkpoint_granularity` says.
  bool activation_checkpointing = false;
  CheckpointGranularity checkpoint_granularity = CheckpointGranularity::kFull;
  int64_t checkpoint_start_layer = 0;
  int64_t checkpoint_end_layer = -1;
  // The loss head computes logits (rows x vocabulary) in chunks of at most this many elements
  // (at least one row each), so with full checkpointing the whole (B T, V) logits never exist.
  int64_t head_chunk_elements = int64_t{1} << 24;
  // The parameters' (and gradients') dtype. f32 or f64 (exactness tests): computed in it. bf16
  // or f16 (mixed precision, train.amp): on the CPU computed in f32 with bf16/f16 rounding of the
  // activations, on a device with native half kernels (CUDA) computed in bf16/f16 with f32
  // accumulation (nn/mixed_precision.h); the optimizer keeps f32 master weights.
  DType dtype = DType::kF32;
  DType param_dtype() const { return dtype; }
  DType compute_dtype() const { return mf::compute_dtype(dtype); }  // f32 for bf16/f16
  // The dtype of the activations between layers and pipeline stages on `device`: `dtype` itself
  // where bf16/f16 run natively there (mf::native_half: CUDA), else compute_dtype() (the CPU
  // computes bf16/f16 models in f32, rounding the activations).
  DType activation_dtype(Device device) const { return native_half(device, dtype) ? dtype : compute_dtype(); }
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  void validate() const;  // throws naming the bad field
  // Whether block `layer` (a whole-model index) is checkpointed.
  bool checkpointed(int64_t layer) const;
};

// The whole model's parameters in Gpt2Model's order: Hugging Face names and logical
// (checkpoint) shapes — what a weights file for this config must hold.
std::vector<std::pair<std::string, Shape>> gpt2_parameter_shapes(const Gpt2Config& c);

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
  std::shared_ptr<nn::ColumnConv1D> c_attn_, c_fc_;
  std::shared_ptr<nn::RowConv1D> attn_proj_, mlp_proj_;
};

// A pipeline stage's share of the model: blocks [first_layer, end_layer); the first stage also
// holds the embeddings, the last ln_f and the head (tied to wte, which it holds a copy of: the
// trainer keeps the two copies' gradients summed). Parameter names stay the whole model's.
struct Gpt2Stage {
  int64_t first_layer = 0;
  int64_t end_layer = -1;  // -1: num_layers
  bool first = true, last = true;
  // Interleaved pipelines: the layers of this rank's chunks 1, 2, ... (chunk 0 is
  // [first_layer, end_layer)); `first` holds the embeddings before chunk 0, `last` the head
  // after the last chunk.
  std::vector<std::pair<int64_t, int64_t>> later_chunks;
  int64_t num_chunks() const { return 1 + static_cast<int64_t>(later_chunks.size()); }
};

class Gpt2Model : public nn::Module {
 public:
  // Random streams: a forward uses streams [s0, s0 + streams_per_forward()) of the default
  // generator at fixed places — s0 for the embedding dropout, s0 + 1 + 3 l onwards for block l —
  // so a pipeline stage running some blocks draws exactly what the whole model draws there.
  static constexpr uint64_t kStreamsPerBlock = 3;

  // Throws before allocating when tp does not divide the heads or the MLP width, or the stage's
  // layers are out of range.
  explicit Gpt2Model(const Gpt2Config& c, const nn::TensorParallel& tp = {}, const Gpt2Stage& stage = {});
  // GPT-2 initialisation: N(0, initializer_range), output projections scaled by
  // 1/sqrt(2 * num_layers), biases 0, LayerNorm 1/0. Parameter i draws from stream i of a
  // generator of its own, so values depend only on (seed, parameter order, position).
  void init_weights(uint64_t seed);
  // ids (B, T) integer -> logits (B, T, V); under tensor parallelism this rank's vocabulary
  // columns (B, T, V / tp).
  Tensor logits(const Tensor& ids) const;
  // ids, labels (B, T) -> mean cross-entropy over labels != ignore_index (-100). Whole model only
  // (one stage). Takes streams_per_forward() streams from the default generator.
  Tensor loss(const Tensor& ids, const Tensor& labels) const;

  // Pipeline pieces. stage_forward: the first stage takes ids (B, T), the others the previous
  // stage's output; returns the activation for the next stage (B, T, C) — (B, T / tp, C) pieces
  // under sequence parallelism — or, on the last stage, the final hidden state (B, T, C). It
  // draws random streams from stream0 on (see kStreamsPerBlock) and leaves the default generator
  // at stream0 + streams_per_forward(); in eval mode it draws none and leaves it alone.
  // seq_len: the logical sequence length T.
  // `chunk`: which of this rank's chunks (interleaved pipelines); the embeddings run before
  // chunk 0 on the first stage, the head's ln_f after the last chunk on the last stage.
  Tensor stage_forward(const Tensor& input, uint64_t stream0, int64_t seq_len, int64_t chunk = 0) const;
  // Last stage: the loss of the final hidden state (B, T, C) against labels (B, T). Logits are
  // computed for chunks of rows (Gpt2Config::head_chunk_elements), each recomputed in backward
  // under full activation checkpointing.
  Tensor head_loss(const Tensor& hidden, const Tensor& labels) const;
  uint64_t streams_per_forward() const { return 1 + kStreamsPerBlock * static_cast<uint64_t>(c_.num_layers); }
  const Gpt2Stage& stage() const { return stage_; }
  // The tied embedding's copy on this stage (first and/or last), or an undefined tensor.
  Tensor embedding_weight() const;
  const Gpt2Config& config() const { return c_; }
  const nn::TensorParallel& tensor_parallel() const { return tp_; }
  // Elements of the logical (unsplit) parameters: num_parameters() on one rank.
  int64_t num_logical_parameters() const;
  // The units of this stage's forward, in order, with the parameters each uses: the embeddings
  // (id 0, first stage: wte, wpe), block l (id 1 + l), the head (id num_layers + 1, last stage:
  // ln_f and the tied wte). ZeRO-3 gathers and releases parameters by unit.
  std::vector<nn::ParamUnit> parameter_units() const;
  // Called around every unit's forward (the head's leave() is in head_loss() / logits()); not
  // owned, may be null.
  void set_param_use_hooks(nn::ParamUseHooks* hooks) { hooks_ = hooks; }
  // Non-embedding parameters and FLOPs per token of a training step (forward + backward):
  // 6 * params + 12 * layers * hidden * seq (attention scores and values, the PaLM/Megatron count).
  double flops_per_token(int64_t seq_len) const;

 private:
  Tensor hidden(const Tensor& ids) const;
  Gpt2Config c_;
  nn::TensorParallel tp_;
  Gpt2Stage stage_;
  std::shared_ptr<nn::Module> transformer_;
  std::shared_ptr<nn::VocabParallelEmbedding> wte_;
  std::shared_ptr<nn::Embedding> wpe_;
  std::vector<std::shared_ptr<Gpt2Block>> blocks_;       // every chunk's, in layer order
  std::vector<std::pair<int64_t, int64_t>> chunk_layers_;  // per chunk: its [first, end) layers
  std::shared_ptr<nn::LayerNorm> ln_f_;
  nn::ParamUseHooks* hooks_ = nullptr;
  int64_t head_unit() const { return c_.num_layers + 1; }
  void enter(int64_t unit) const {
    if (hooks_) hooks_->enter(unit);
  }
  Tensor leave(int64_t unit, const Tensor& out) const { return hooks_ ? hooks_->leave(unit, out) : out; }
};

}  // namespace mf::models
