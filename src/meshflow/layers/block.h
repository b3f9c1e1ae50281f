// One Transformer block for every model family: a BlockSpec says which norm, which residual
// arrangement, which attention (layers/attention.h) and which MLP (layers/mlp.h), and under which
// Hugging Face names; the model holds one block per layer.
//   pre-norm:   h = x + drop(attn(norm1(x)));  y = h + drop(mlp(norm2(h)))     (GPT-2, Llama, ViT)
//   parallel:   y = x + drop(attn(norm1(x))) + drop(mlp(norm2(x)))            (GPT-NeoX, GPT-J)
//   post-norm:  h = norm1(x + drop(attn(x)));  y = norm2(h + drop(mlp(h)))     (BERT, RoBERTa)
//   MLP only:   y = x + drop(mlp(norm2(x)))   (pre-norm, no attention nor norm1 in the order:
//               a residual MLP block, the test model's)
//   encoder-decoder (pre-norm with cross-attention, T5's decoder):
//               h = x + drop(attn(norm1(x)));  h = h + drop(cross(norm_cross(h), memory));
//               y = h + drop(mlp(norm2(h)))
// x, y (B, T, C); memory (B, Tk, C). Mixed precision: each residual sum rounded to the parameter
// dtype (before the post-norm's norm). Dropout: the attention's (on its probabilities), then the
// attention output's, (the cross-attention's two likewise,) then the MLP's hidden features' (when
// its spec has one) and the MLP output's, each taking the next stream of the default generator
// when it is on.
//
// The block is the one module of a layer: every projection and norm is registered under it at
// the dotted path its spec names, in the order the spec gives, so the names need not nest as one
// attention module and one MLP module — BERT's norms sit inside "attention.output" and "output",
// its MLP is "intermediate.dense" and "output.dense".
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "meshflow/layers/attention.h"
#include "meshflow/layers/mlp.h"

namespace mf::layers {

enum class NormKind { kLayerNorm, kRMSNorm };
enum class Residual { kPreNorm, kParallel, kPostNorm };
// The parts of a block, registered (and so listed by named_parameters()) in a spec's order: the
// attention's projections (q, k, v or the fused one, then out) and the MLP's (gate, up, down) each
// come together.
enum class BlockPart { kNorm1, kAttention, kNorm2, kMlp, kCrossNorm, kCrossAttention };

struct BlockSpec {
  AttentionSpec attention;  // its projections' names: paths under the block ("attn.c_attn")
  MlpSpec mlp;              // likewise ("mlp.c_fc", "intermediate.dense")
  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-5;
  Residual residual = Residual::kPreNorm;
  double dropout_p = 0.0;  // on the attention's and the MLP's outputs, in training
  // Hugging Face's paths of the norms under the block: norm1 is the attention's (before it, or
  // after its residual when post-norm), norm2 the MLP's, norm_cross the cross-attention's.
  std::string norm1, norm2, norm_cross;
  // A pre-norm block's cross-attention (T5's EncDecAttention), when the order names it with
  // kCrossNorm; its projections' names are paths under the block.
  AttentionSpec cross_attention;
  // Registration order, each part once: GPT-2 and Llama norm1, attention, norm2, MLP; GPT-NeoX
  // both norms first; BERT attention, norm1, MLP, norm2; ViT attention, MLP, norm1, norm2; T5
  // attention, norm1, (cross-attention, its norm,) MLP, norm2. A pre-norm block may leave out the
  // attention with norm1 (an MLP-only block: norm2, MLP).
  std::vector<BlockPart> order = {BlockPart::kNorm1, BlockPart::kAttention, BlockPart::kNorm2, BlockPart::kMlp};
};

// What a block reads besides its input, each optional.
struct BlockInputs {
  AttentionInputs self;   // the self-attention's: decoding, key padding, a bias on the scores
  GlobalTensor memory;    // (B, Tk, C): what the cross-attention attends to (the encoder's output)
  AttentionInputs cross;  // the cross-attention's (its key padding: the memory's)
};

// What BERT's and ViT's layers share: separate q, k, v projections with biases, bidirectional
// attention, an exact-GELU MLP with biases, LayerNorm, dropout on the attention probabilities and
// on both outputs, and Hugging Face's names for BERT-like layers — `<self_attention>.query|key|value`,
// attention.output.dense, intermediate.dense, output.dense; the norms' names, the residual and the
// order are the model's.
BlockSpec encoder_block_spec(int64_t hidden, int64_t heads, int64_t ffn, double norm_eps, double attention_dropout,
                             double output_dropout, const std::string& self_attention);

class TransformerBlock : public nn::ModuleGroup {
 public:
  // Throws when the order does not name each part once, and (the attention's and the
  // projections' checks) naming the config key the ranks splitting the block do not divide.
  TransformerBlock(const BlockSpec& spec, const Place& place, DType dt);
  // (B, T, C) -> (B, T, C). recompute_attention: checkpoint the attention cores (selective
  // recomputation) when grad mode is on. A block with cross-attention needs in.memory.
  GlobalTensor forward(const GlobalTensor& x, bool recompute_attention = false, const BlockInputs& in = {}) const;

 private:
  GlobalTensor drop(const GlobalTensor& x) const;

  BlockSpec s_;
  DType dtype_;
  std::shared_ptr<Norm> norm1_, norm2_, cross_norm_;
  std::unique_ptr<Attention> attention_, cross_;
  std::unique_ptr<Mlp> mlp_;
};

}  // namespace mf::layers
