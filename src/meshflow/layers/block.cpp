#include "meshflow/layers/block.h"

namespace mf::layers {

namespace {
std::shared_ptr<Norm> make_norm(const BlockSpec& s, const Place& place, DType dt) {
  const int64_t C = s.attention.hidden;
  if (s.norm == NormKind::kRMSNorm) return std::make_shared<RMSNorm>(C, s.norm_eps, place, dt);
  return std::make_shared<LayerNorm>(C, s.norm_eps, place, dt);
}
}  // namespace

TransformerBlock::TransformerBlock(const BlockSpec& spec, const Place& place, DType dt) : s_(spec), dtype_(dt) {
  norm1_ = add_at(*this, s_.norm1, make_norm(s_, place, dt));
  if (s_.norms_first) norm2_ = add_at(*this, s_.norm2, make_norm(s_, place, dt));
  attention_ = add_at(*this, s_.attention_name, std::make_shared<SelfAttention>(s_.attention, place, dt));
  if (!s_.norms_first) norm2_ = add_at(*this, s_.norm2, make_norm(s_, place, dt));
  mlp_ = add_at(*this, s_.mlp_name, std::make_shared<Mlp>(s_.mlp, place, dt));
}

GlobalTensor TransformerBlock::drop(const GlobalTensor& x) const {
  // Each dropout takes the next stream of the default generator; none is drawn without one.
  return s_.dropout_p > 0.0 && training() ? global::dropout(x, s_.dropout_p) : x;
}

GlobalTensor TransformerBlock::forward(const GlobalTensor& x, bool recompute_attention, const LayerDecode* decode,
                                       const Tensor& key_padding) const {
  const GlobalTensor a = drop(attention_->forward(norm1_->forward(x), recompute_attention, decode, key_padding));
  if (s_.residual == Residual::kParallel) {
    const GlobalTensor m = drop(mlp_->forward(norm2_->forward(x)));
    return round_to(global::add(round_to(global::add(x, a), dtype_), m), dtype_);
  }
  const GlobalTensor h = round_to(global::add(x, a), dtype_);
  return round_to(global::add(h, drop(mlp_->forward(norm2_->forward(h)))), dtype_);
}

}  // namespace mf::layers
