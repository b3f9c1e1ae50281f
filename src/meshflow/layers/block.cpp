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
  return {.attention = {.hidden = hidden, .heads = heads, .causal = false, .dropout_p = attention_dropout,
                        .q = self_attention + ".query", .k = self_attention + ".key", .v = self_attention + ".value",
                        .out = "attention.output.dense"},
          .mlp = {.hidden = hidden, .ffn = ffn, .act = Activation::kGelu, .up = "intermediate.dense", .down = "output.dense"},
          .norm = NormKind::kLayerNorm, .norm_eps = norm_eps, .dropout_p = output_dropout};
}

TransformerBlock::TransformerBlock(const BlockSpec& spec, const Place& place, DType dt) : s_(spec), dtype_(dt) {
  MF_CHECK(s_.order.size() >= 2 && s_.order.size() <= 6, "block: the order names ", s_.order.size(),
           " parts, not the 4 parts (or norm2 and the MLP; or the 6 with cross-attention) once each");
  auto norm = [&](std::shared_ptr<Norm>& n, const std::string& path, const char* what) {
    MF_CHECK(!n, "block: ", what, " twice in the order");
    n = add_at(*this, path, make_norm(s_, place, dt));
  };
  auto attention = [&](std::unique_ptr<Attention>& a, const AttentionSpec& spec, const char* what) {
    MF_CHECK(!a, "block: ", what, " twice in the order");
    a = std::make_unique<Attention>(spec, *this, place, dt);
  };
  for (BlockPart part : s_.order) {
    switch (part) {
      case BlockPart::kNorm1:
        norm(norm1_, s_.norm1, "norm1");
        break;
      case BlockPart::kAttention:
        attention(attention_, s_.attention, "the attention");
        break;
      case BlockPart::kCrossNorm:
        norm(cross_norm_, s_.norm_cross, "the cross-attention's norm");
        break;
      case BlockPart::kCrossAttention:
        attention(cross_, s_.cross_attention, "the cross-attention");
        break;
      case BlockPart::kNorm2:
        norm(norm2_, s_.norm2, "norm2");
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
  MF_CHECK(static_cast<bool>(cross_) == static_cast<bool>(cross_norm_) && (!cross_ || s_.residual == Residual::kPreNorm),
           "block: cross-attention comes with its norm, in a pre-norm block");
}

GlobalTensor TransformerBlock::drop(const GlobalTensor& x) const {
  // Each dropout takes the next stream of the default generator; none is drawn without one.
  return s_.dropout_p > 0.0 && training() ? global::dropout(x, s_.dropout_p) : x;
}

GlobalTensor TransformerBlock::forward(const GlobalTensor& x, bool recompute_attention, const BlockInputs& in) const {
  MF_CHECK(!cross_ || in.memory.placement, "block: a block with cross-attention needs the memory it attends to");
  auto attend = [&](const GlobalTensor& h) { return drop(attention_->forward(h, training(), recompute_attention, in.self)); };
  const auto mlp = [&](const GlobalTensor& h) { return drop(mlp_->forward(h, training())); };
  switch (s_.residual) {
    case Residual::kParallel: {
      const GlobalTensor a = attend(norm1_->forward(x));
      const GlobalTensor m = mlp(norm2_->forward(x));
      return round_to(global::add(round_to(global::add(x, a), dtype_), m), dtype_);
    }
    case Residual::kPostNorm: {
      const GlobalTensor h = norm1_->forward(round_to(global::add(x, attend(x)), dtype_));
      return norm2_->forward(round_to(global::add(h, mlp(h)), dtype_));
    }
    case Residual::kPreNorm:
      break;
  }
  GlobalTensor h = attention_ ? round_to(global::add(x, attend(norm1_->forward(x))), dtype_) : x;
  if (cross_) {
    const GlobalTensor c = cross_->forward(cross_norm_->forward(h), training(), recompute_attention, in.cross, in.memory);
    h = round_to(global::add(h, drop(c)), dtype_);
  }
  return round_to(global::add(h, mlp(norm2_->forward(h))), dtype_);
}

}  // namespace mf::layers
