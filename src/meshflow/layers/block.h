// One Transformer block for every model family: a BlockSpec says which norm, which residual
// arrangement, which attention (layers/attention.h) and which MLP (layers/mlp.h), and under which
// Hugging Face names; the model holds one block per layer.
//   pre-norm:  h = x + drop(attn(norm1(x)));  y = h + drop(mlp(norm2(h)))          (GPT-2, Llama)
//   parallel:  y = x + drop(attn(norm1(x))) + drop(mlp(norm2(x)))                 (GPT-NeoX, GPT-J)
// x, y (B, T, C). Mixed precision: each residual sum rounded to the parameter dtype.
#pragma once
#include <memory>
#include <string>

#include "meshflow/layers/attention.h"
#include "meshflow/layers/mlp.h"

namespace mf::layers {

enum class NormKind { kLayerNorm, kRMSNorm };
enum class Residual { kPreNorm, kParallel };

struct BlockSpec {
  AttentionSpec attention;
  MlpSpec mlp;
  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-5;
  Residual residual = Residual::kPreNorm;
  double dropout_p = 0.0;  // on the attention's and the MLP's outputs, in training
  // Hugging Face's names of the parts, in registration order: norm1, attention, norm2, MLP; or
  // with norms_first both norms before the attention (GPT-NeoX's order).
  std::string norm1 = "ln_1", attention_name = "attn", norm2 = "ln_2", mlp_name = "mlp";
  bool norms_first = false;
};

class TransformerBlock : public nn::ModuleGroup {
 public:
  // Throws (the attention's and the projections' checks) naming the config key the ranks
  // splitting the block do not divide.
  TransformerBlock(const BlockSpec& spec, const Place& place, DType dt);
  // (B, T, C) -> (B, T, C). recompute_attention: checkpoint the attention core (selective
  // recomputation) when grad mode is on. decode: attend to the cached positions too, appending
  // these. key_padding: bool (B, keys), true = padding.
  GlobalTensor forward(const GlobalTensor& x, bool recompute_attention = false, const LayerDecode* decode = nullptr,
                       const Tensor& key_padding = Tensor()) const;

 private:
  GlobalTensor drop(const GlobalTensor& x) const;

  BlockSpec s_;
  DType dtype_;
  std::shared_ptr<Norm> norm1_, norm2_;
  std::shared_ptr<SelfAttention> attention_;
  std::shared_ptr<Mlp> mlp_;
};

}  // namespace mf::layers
