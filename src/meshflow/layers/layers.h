// Global-view layers (LiBai's layers): each declares its parameters' SBPs on its Place and runs
// global ops. On one rank every layer is exactly its plain layer.
//
//   Embedding  a (num, dim) table; `split_rows` splits it S(0) (the vocabulary) — the lookup is
//              then the vocabulary-split embedding (P, reduced to B inside the op); else B.
//   LayerNorm  weight and bias B; keeps x's SBP.
//   ParamGroup parameters of any shape under the caller's names, B.
//   Conv1D     y = x W + b with W (in, out) (Hugging Face GPT-2's layout). Its WeightSplit:
//     kNone     W, b B.
//     kColumns  W split S(1) on its output features (in `groups` equal column blocks, each split:
//               GPT-2's fused q|k|v), b alike; x is boxed to B first (an all-gather when the
//               sequence is split); y is S(last). With groups > 1, y is (..., groups, out /
//               groups): every group split alike.
//     kRows     W split S(0) on its input features; x S(last) (a kColumns output); x W is P,
//               boxed to the Place's hidden SBP (B: all-reduce; sequence split: reduce-scatter),
//               then b (B) is added.
// Gradients follow boxing's rule (global/boxing.h): the gradients of B parameters on ranks that
// split a layer are partial sums, which the runtime sums.
// Mixed precision (bf16/f16 parameters, nn/mixed_precision.h): weights are cast to f32 for the
// GEMM and each output rounded to the parameter dtype — kRows's after its partial sums are
// reduced and the bias added.
#pragma once
#include "meshflow/layers/place.h"
#include "meshflow/nn/module.h"

namespace mf::layers {

class Embedding : public nn::Module {
 public:
  Embedding(int64_t num, int64_t dim, const Place& place, bool split_rows, DType dt = DType::kF32);
  // ids (...) -> (..., dim) B.
  GlobalTensor forward(const GlobalTensor& ids) const;
  // The table as the layer computes with it (nn::compute: f32 on the CPU under mixed precision).
  GlobalTensor table() const;
  // The table as stored (bf16/f16 under mixed precision): (num, dim), S(0) or B.
  GlobalTensor stored_table() const;
  int64_t num() const { return num_; }
  // The most rows any rank holds (ceil(num / ranks) when split): chunk sizes every rank agrees on.
  int64_t max_local_rows() const;
  // x (..., dim) against the table (a tied output projection), + `bias` (num) when given:
  // (..., num), S(last) when the rows are split, rounded to the table's storage dtype.
  GlobalTensor project(const GlobalTensor& x, const GlobalTensor& bias = {}) const;
  Tensor weight;  // this rank's rows

 private:
  int64_t num_, dim_;
  Place place_;
  bool split_rows_;
};

// A bias over the rows of an output projection tied to an Embedding (BERT's cls.predictions.bias):
// parameter "bias" (num), split like the table's rows. A group: the model may add modules under it
// (BERT's transform).
class RowBias : public nn::ModuleGroup {
 public:
  RowBias(int64_t num, const Place& place, bool split_rows, DType dt = DType::kF32);
  // As the layer computes with it (nn::compute): (num), S(0) or B.
  GlobalTensor value() const;
  Tensor bias;  // this rank's rows

 private:
  int64_t num_;
  Place place_;
  bool split_rows_;
};

// A normalisation over the last axis, LayerNorm or RMSNorm: what a block holds whatever its kind.
class Norm : public nn::Module {
 public:
  virtual GlobalTensor forward(const GlobalTensor& x) const = 0;
};

class LayerNorm : public Norm {
 public:
  // rounds_input: x is a sum not yet rounded (BERT's embeddings): rounded to the storage dtype
  // first, as a model computing in that dtype holds it.
  LayerNorm(int64_t dim, double eps, const Place& place, DType dt = DType::kF32, bool rounds_input = false);
  GlobalTensor forward(const GlobalTensor& x) const override;  // over the last axis
  Tensor weight, bias;

 private:
  double eps_;
  bool rounds_input_;
  Place place_;
};

enum class WeightSplit { kNone, kColumns, kRows };
// An elementwise activation: the tanh-approximated or exact (erf) GELU, ReLU, SiLU, tanh; kNone the
// identity. The Mlp's (layers/mlp.h), and what a Linear may apply to its output, rounded to the
// storage dtype again (BERT's transform and pooler).
enum class Activation { kNone, kGeluTanh, kGelu, kRelu, kSilu, kTanh };
GlobalTensor activate(Activation a, const GlobalTensor& x);

// The output features of a kColumns layer split in whole units of `features` (attention heads of
// head_dim features), which the model config counts as `key` (named in the error when the ranks
// do not divide them). or_replicate: when they do not, keep the layer whole on every rank (B
// weights and output) instead of failing — key/value heads fewer than the ranks.
struct SplitUnits {
  int64_t features = 1;
  const char* key = nullptr;
  bool or_replicate = false;
};

// A dense projection, Conv1D or Linear: what a block holds whatever its weights' layout.
class Projection : public nn::Module {
 public:
  virtual GlobalTensor forward(const GlobalTensor& x) const = 0;
};

class Conv1D : public Projection {
 public:
  Conv1D(int64_t in, int64_t out, const Place& place, WeightSplit split, DType dt = DType::kF32, int64_t groups = 1,
         SplitUnits units = {});
  // x (..., in) -> (..., out); kColumns with groups > 1: (..., groups, out / groups).
  GlobalTensor forward(const GlobalTensor& x) const override;
  Tensor weight, bias;

 private:
  int64_t in_, out_, groups_;
  Place place_;
  WeightSplit split_;
};

// y = x W^T + b with W (out, in) (torch.nn.Linear's layout), bias optional; splits as Conv1D's
// (kColumns: W S(0), b S(0), y S(last); kRows: W S(1), y boxed to the hidden SBP, then b).
class Linear : public Projection {
 public:
  Linear(int64_t in, int64_t out, const Place& place, WeightSplit split, DType dt = DType::kF32, bool with_bias = true,
         SplitUnits units = {}, Activation activation = Activation::kNone);
  GlobalTensor forward(const GlobalTensor& x) const override;  // x (..., in) -> (..., out)
  Tensor weight, bias;                                // bias undefined without one

 private:
  int64_t in_, out_;
  Place place_;
  WeightSplit split_;
  bool whole_input_;  // kColumns asked for: x is boxed to B even when the layer stays whole
  Activation activation_;
  GlobalTensor affine(const GlobalTensor& x) const;  // before the activation
};

// Parameters of any shape under the caller's names, B on every rank (ViT's class token and
// position embeddings, its patch projection's Conv2d weight): a group, so modules may be added
// under it too; its own parameters come first in named_parameters().
class ParamGroup : public nn::ModuleGroup {
 public:
  explicit ParamGroup(const Place& place) : place_(place) {}
  // Registers parameter `name` of `shape` (zeros), returning it.
  Tensor add_param(const std::string& name, const Shape& shape, DType dt = DType::kF32);
  // Parameter `name` as the layers compute with it (nn::compute: f32 on the CPU under mixed
  // precision), B with its own shape.
  GlobalTensor value(const std::string& name) const;
  // x (..., in) against parameter `weight` viewed as (out, in) (a Conv2d's (out, ch, P, P) over
  // flattened patches) + parameter `bias` (out): (..., out), rounded to the storage dtype.
  GlobalTensor affine(const GlobalTensor& x, const std::string& weight, const std::string& bias) const;
  // x + parameter `name` viewed as `view` (broadcast over x's leading axes), rounded to the
  // storage dtype (ViT's position embeddings).
  GlobalTensor plus(const GlobalTensor& x, const std::string& name, const Shape& view) const;

 private:
  Place place_;
  std::vector<std::pair<std::string, Tensor>> own_;
  const Tensor& param(const std::string& name) const;  // throws naming it when absent
};

// RMSNorm over the last axis (x / sqrt(mean(x^2) + eps) * weight), weight B; keeps x's SBP.
class RMSNorm : public Norm {
 public:
  RMSNorm(int64_t dim, double eps, const Place& place, DType dt = DType::kF32);
  GlobalTensor forward(const GlobalTensor& x) const override;
  Tensor weight;

 private:
  double eps_;
  Place place_;
};

}  // namespace mf::layers
