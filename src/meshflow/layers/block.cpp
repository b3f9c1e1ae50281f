#include "meshflow/layers/block.h"

#include "meshflow/core/error.h"

namespace mf::layers {

namespace {
std::shared_ptr<Norm> make_norm(const BlockSpec& s, const Place& place, DType dt) {
  const int64_t C = s.mlp.hidden;
  if (s.norm == NormKind::kRMSNorm) return std::make_shared<RMSNorm>(C, s.norm_eps, place, dt);
  return std::make_shared<LayerNorm>(C, s.norm_eps, place, dt);
}
}  // namespace

BlockSpec encoder_block_spec(int64_t hidden, int64_t heads, int64_t ffn, double norm_eps, double attention_dropout,
                             double output_dropout, const std::string& self_attention) {
  BlockSpec s;
  s.attention.q = self_attention + ".query";
  s.attention.k = self_attention + ".key";
  s.attention.v = self_attention + ".value";
  s.attention.out = "attention.output.dense";
  s.mlp.up = "intermediate.dense";
  s.mlp.down = "output.dense";
  s.attention.hidden = hidden;
  s.attention.heads = heads;
  s.attention.causal = false;
  s.attention.dropout_p = attention_dropout;
  s.mlp.hidden = hidden;
  s.mlp.ffn = ffn;
  s.mlp.act = Activation::kGelu;
  s.norm = NormKind::kLayerNorm;
  s.norm_eps = norm_eps;
  s.dropout_p = output_dropout;
  return s;
}

TransformerBlock::TransformerBlock(const BlockSpec& spec, const Place& place, DType dt) : s_(spec), dtype_(dt) {
  MF_CHECK(s_.order.size() == 4 || s_.order.size() == 2, "block: the order names ", s_.order.size(),
           " parts, not the 4 parts (or norm2 and the MLP) once each");
  for (BlockPart part : s_.order) {
    switch (part) {
      case BlockPart::kNorm1:
        MF_CHECK(!norm1_, "block: norm1 twice in the order");
        norm1_ = add_at(*this, s_.norm1, make_norm(s_, place, dt));
        break;
      case BlockPart::kAttention:
        MF_CHECK(!attention_, "block: the attention twice in the order");
        attention_ = std::make_unique<SelfAttention>(s_.attention, *this, place, dt);
        break;
      case BlockPart::kNorm2:
        MF_CHECK(!norm2_, "block: norm2 twice in the order");
        norm2_ = add_at(*this, s_.norm2, make_norm(s_, place, dt));
        break;
      case BlockPart::kMlp:
        MF_CHECK(!mlp_, "block: the MLP twice in the order");
        mlp_ = std::make_unique<Mlp>(s_.mlp, *this, place, dt);
        break;
    }
  }
  MF_CHECK(norm2_ && mlp_ && static_cast<bool>(norm1_) == static_cast<bool>(attention_),
           "block: the order must name norm2 and the MLP, and norm1 with the attention or neither");
  MF_CHECK(attention_ || s_.residual == Residual::kPreNorm, "block: a block without attention must be pre-norm");
}

GlobalTensor TransformerBlock::drop(const GlobalTensor& x) const {
  // Each dropout takes the next stream of the default generator; none is drawn without one.
  return s_.dropout_p > 0.0 && training() ? global::dropout(x, s_.dropout_p) : x;
}

GlobalTensor TransformerBlock::forward(const GlobalTensor& x, bool recompute_attention, const LayerDecode* decode,
                                       const Tensor& key_padding) const {
  auto attend = [&](const GlobalTensor& in) {
    return drop(attention_->forward(in, training(), recompute_attention, decode, key_padding));
  };
  switch (s_.residual) {
    case Residual::kParallel: {
      const GlobalTensor a = attend(norm1_->forward(x));
      const GlobalTensor m = drop(mlp_->forward(norm2_->forward(x)));
      return round_to(global::add(round_to(global::add(x, a), dtype_), m), dtype_);
    }
    case Residual::kPostNorm: {
      const GlobalTensor h = norm1_->forward(round_to(global::add(x, attend(x)), dtype_));
      return norm2_->forward(round_to(global::add(h, drop(mlp_->forward(h))), dtype_));
    }
    case Residual::kPreNorm:
      break;
  }
  const GlobalTensor h = attention_ ? round_to(global::add(x, attend(norm1_->forward(x))), dtype_) : x;
  return round_to(global::add(h, drop(mlp_->forward(norm2_->forward(h)))), dtype_);
}

}  // namespace mf::layers
