// The feed-forward layer of a Transformer block, every family's: up (and gate) projections split
// on their output features, the activation, the down projection split on its input features.
//   plain:  x (B, T, C) -> act(up(x)) (B, T, F) -> down (B, T, C)          (GPT-2, BERT, ViT, GPT-NeoX)
//   gated:  x (B, T, C) -> act(gate(x)) * up(x) (B, T, F) -> down (B, T, C) (SwiGLU, gated GELU)
// with dropout on the (B, T, F) hidden features before down when the spec asks (T5's).
// Like Attention (layers/attention.h), Mlp is not a module of its own: it registers its
// projections into the module that holds it at the dotted paths the spec names ("mlp.c_fc";
// BERT's "intermediate.dense" and "output.dense", two modules of the block).
#pragma once
#include <memory>
#include <string>

#include "meshflow/layers/attention.h"

namespace mf::layers {

struct MlpSpec {
  int64_t hidden = 0;  // C
  int64_t ffn = 0;     // F
  Activation act = Activation::kGeluTanh;
  bool gated = false;
  bool bias = true;
  WeightLayout weights = WeightLayout::kLinear;
  double dropout_p = 0.0;  // on the hidden features, in training (T5)
  // Hugging Face's names: dotted paths under the module they are registered into
  // ("mlp.gate_proj"), registered in the order gate (when gated), up, down.
  std::string gate, up, down;
  const char* ffn_key = "model.ffn_hidden_size";  // named when the ranks do not divide F
};

class Mlp {
 public:
  // Registers the projections into `parent` at the spec's paths.
  Mlp(const MlpSpec& spec, nn::ModuleGroup& parent, const Place& place, DType dt);
  // (B, T, C) -> (B, T, C). training: the hidden dropout (the holder's mode), taking the next
  // stream of the default generator.
  GlobalTensor forward(const GlobalTensor& x, bool training) const;

 private:
  MlpSpec s_;
  DType dtype_;
  std::shared_ptr<Projection> gate_, up_, down_;
};

}  // namespace mf::layers
