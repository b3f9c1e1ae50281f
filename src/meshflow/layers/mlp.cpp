#include "meshflow/layers/mlp.h"

#include "meshflow/core/error.h"

namespace mf::layers {

namespace {
std::shared_ptr<Projection> projection(const MlpSpec& s, int64_t in, int64_t out, const Place& place, WeightSplit split,
                                       DType dt, SplitUnits units) {
  if (s.weights == WeightLayout::kConv1D) {
    MF_CHECK(s.bias, "mlp: Conv1D projections always have a bias");
    return std::make_shared<Conv1D>(in, out, place, split, dt, 1, units);
  }
  return std::make_shared<Linear>(in, out, place, split, dt, s.bias, units);
}

}  // namespace

Mlp::Mlp(const MlpSpec& spec, nn::ModuleGroup& parent, const Place& place, DType dt) : s_(spec), dtype_(dt) {
  const SplitUnits ffn{1, s_.ffn_key};
  if (s_.gated) gate_ = add_at(parent, s_.gate, projection(s_, s_.hidden, s_.ffn, place, WeightSplit::kColumns, dt, ffn));
  up_ = add_at(parent, s_.up, projection(s_, s_.hidden, s_.ffn, place, WeightSplit::kColumns, dt, ffn));
  down_ = add_at(parent, s_.down, projection(s_, s_.ffn, s_.hidden, place, WeightSplit::kRows, dt, {}));
}

GlobalTensor Mlp::forward(const GlobalTensor& x, bool training) const {
  // Mixed precision: the activation (and the gated product, and the dropout) rounded to the
  // parameter dtype.
  GlobalTensor h = round_to(activate(s_.act, (s_.gated ? gate_ : up_)->forward(x)), dtype_);
  if (s_.gated) h = round_to(global::mul(h, up_->forward(x)), dtype_);
  return down_->forward(dropout(h, training ? s_.dropout_p : 0.0, dtype_));
}

}  // namespace mf::layers
