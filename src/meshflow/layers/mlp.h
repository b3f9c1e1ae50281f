// The feed-forward layer of a Transformer block, every family's: up (and gate) projections split
// on their output features, the activation, the down projection split on its input features.
//   plain:  x (B, T, C) -> act(up(x)) (B, T, F) -> down (B, T, C)          (GPT-2, BERT, GPT-NeoX)
//   gated:  x (B, T, C) -> act(gate(x)) * up(x) (B, T, F) -> down (B, T, C) (SwiGLU, gated GELU)
#pragma once
#include <memory>
#include <string>

#include "meshflow/layers/attention.h"

namespace mf::layers {

enum class Activation { kGeluTanh, kGelu, kRelu, kSilu };

struct MlpSpec {
  int64_t hidden = 0;  // C
  int64_t ffn = 0;     // F
  Activation act = Activation::kGeluTanh;
  bool gated = false;
  bool bias = true;
  WeightLayout weights = WeightLayout::kLinear;
  // Hugging Face's names (paths under the MLP module); the gate is registered first.
  std::string gate = "gate_proj", up = "c_fc", down = "c_proj";
  const char* ffn_key = "model.ffn_hidden_size";  // named when the ranks do not divide F
};

class Mlp : public nn::ModuleGroup {
 public:
  Mlp(const MlpSpec& spec, const Place& place, DType dt);
  GlobalTensor forward(const GlobalTensor& x) const;  // (B, T, C) -> (B, T, C)

 private:
  MlpSpec s_;
  DType dtype_;
  std::shared_ptr<Projection> gate_, up_, down_;
};

}  // namespace mf::layers
