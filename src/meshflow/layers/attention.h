// Attention, one layer for every model family: the q/k/v projections in the layout its Hugging
// Face model stores them, grouped-query heads, rotary embeddings on all or part of each head,
// causal and sliding-window masks, padding, an additive bias on the scores (T5's relative
// position bias, layers/position_bias.h), the scores' scale, dropout, a key/value cache for
// decoding, selective recomputation of the attention core, and cross-attention (keys and values
// from another sequence: T5's decoder reading the encoder). A model describes its attention with
// an AttentionSpec; the layer splits whole heads over the ranks splitting it (layers/layers.h).
// Attention is not a module of its own: it registers its projections into the module that holds
// it (the block, layers/block.h) at the dotted paths the spec names ("attn.c_attn",
// "attention.self.query"), so that each family keeps Hugging Face's names however they nest.
//
//   x (B, T, C) [memory (B, Tk, C)] -> q (B, H, T, D), k, v (B, KV, Tk, D) -> attention
//   (B, H, T, D) -> (B, T, H D) -> output projection (B, T, C), before the block's dropout and
//   residual.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "meshflow/core/error.h"
#include "meshflow/layers/kv_cache.h"
#include "meshflow/layers/layers.h"

namespace mf::layers {

// How the q, k and v projections are stored.
enum class QkvLayout {
  kSeparate,      // three projections q, k, v (Llama, BERT, ViT, T5)
  kFusedBlocks,   // one (C, 3 C) Conv1D, q | k | v in three column blocks (GPT-2's c_attn)
  kFusedPerHead,  // one (3 C, C) Linear, each head's q, k, v side by side (GPT-NeoX's query_key_value)
};

// The weight layout of every projection of a block: torch.nn.Linear's (out, in), or Hugging
// Face GPT-2's Conv1D (in, out).
enum class WeightLayout { kLinear, kConv1D };

struct AttentionSpec {
  int64_t hidden = 0;    // C
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // KV (grouped-query attention); 0: H
  int64_t head_dim = 0;  // D; 0: C / H
  QkvLayout qkv = QkvLayout::kSeparate;
  WeightLayout weights = WeightLayout::kLinear;
  bool qkv_bias = true, out_bias = true;
  // Rotary position embedding (rotate-half layout) on the first `rotary_dims` features of every
  // q and k head (0: the whole head), with these inverse frequencies; none when empty.
  std::vector<double> rotary_inv_freq;
  int64_t rotary_dims = 0;
  bool causal = true;
  int64_t window = 0;  // sliding window (causal only); 0: none
  double dropout_p = 0.0;  // on the attention probabilities, in training
  double scale = 0.0;      // on the scores q k^T; 0: 1/sqrt(D) (T5: 1, folded into q's initialisation)
  // The core unfused (scores, bias, masks, softmax, dropout, values: Hugging Face's eager
  // attention) even without a bias: T5's, whose unscaled scores the fused kernel's f32 sums
  // reproduce less closely.
  bool eager = false;
  // Hugging Face's names of the projections: dotted paths under the module they are registered
  // into ("self_attn.q_proj", "attention.self.query"); `fused` names the one projection of a
  // fused layout. Registered in the order q, k, v (or fused), out.
  std::string q, k, v, fused, out;
  // The config keys counting the heads (named when the ranks do not divide them).
  const char* heads_key = "model.num_attention_heads";
  const char* kv_heads_key = "model.num_key_value_heads";

  int64_t dim() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
};

// What an attention reads besides its input, each optional.
struct AttentionInputs {
  const LayerDecode* decode = nullptr;  // attend to the cached positions too, appending these
  Tensor key_padding;                   // bool (B, Tk), true = padding
  // (H, Tq, Tk), added to the scores with its gradient (T5's relative position bias). The core
  // then runs unfused: scores, bias, masks, softmax, dropout, values.
  GlobalTensor bias;
};

// Registers `m` under a dotted path of `parent` ("attention.self.query"), creating the groups
// between (or adding to those already there); returns m.
template <class M>
std::shared_ptr<M> add_at(nn::ModuleGroup& parent, const std::string& path, std::shared_ptr<M> m);

class Attention {
 public:
  // Registers the projections into `parent` at the spec's paths. Throws when C is not H whole
  // heads, H not a multiple of KV, or (the layers' check) the ranks splitting the layer do not
  // divide the heads, naming the config key.
  Attention(const AttentionSpec& spec, nn::ModuleGroup& parent, const Place& place, DType dt);
  // x (B, T, C) -> (B, T, C). training: dropout on the probabilities (the holder's mode).
  // recompute: checkpoint the attention core (from q, k, v to its output) when grad mode is on.
  // memory (B, Tk, C): cross-attention, the keys and values projected from it (separate q, k, v
  // only; no rotary, no decoding); undefined: self-attention.
  GlobalTensor forward(const GlobalTensor& x, bool training, bool recompute = false, const AttentionInputs& in = {},
                       const GlobalTensor& memory = {}) const;
  const AttentionSpec& spec() const { return s_; }

 private:
  // (B, n, T, D) rotated by each position (each row's offset when decoding) and rounded.
  GlobalTensor rotate(const GlobalTensor& h, const LayerDecode* decode) const;

  AttentionSpec s_;
  DType dtype_;
  Place place_;  // where the core runs (layers/place.h: attention_sbp)
  std::shared_ptr<Projection> q_, k_, v_, fused_, out_;
};

// ---- implementation of the template

std::shared_ptr<nn::ModuleGroup> group_at(nn::ModuleGroup& parent, const std::string& path);

template <class M>
std::shared_ptr<M> add_at(nn::ModuleGroup& parent, const std::string& path, std::shared_ptr<M> m) {
  MF_CHECK(!path.empty() && path.front() != '.' && path.back() != '.', "layers: the module path '", path,
           "' is empty or starts or ends with a dot");
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return parent.add(path, std::move(m));
  return group_at(parent, path.substr(0, dot))->add(path.substr(dot + 1), std::move(m));
}

}  // namespace mf::layers
