#include "meshflow/layers/layers.h"

#include "meshflow/core/error.h"

namespace mf::layers {

namespace {
// This rank's piece of a parameter of layout `l` filled with `value`; undefined on a shape-only
// Place (the parameter is declared, not held).
Tensor local_filled(const nn::ParamLayout& l, const Place& p, DType dt, double value = 0.0) {
  if (!p.held()) return Tensor();
  Tensor t = zeros(l.local_shape(p.size(), p.rank()), dt);
  if (value != 0.0) fill_(t, value);
  return t;
}

// The split a layer of `out` output features (in `groups` groups) takes on `place`: none on one
// rank; kColumns checks that the ranks divide the units of each group (or replicates, when
// allowed); kRows that they divide the `in` input features.
WeightSplit resolved_split(WeightSplit split, int64_t in, int64_t out, int64_t groups, const SplitUnits& units,
                           const Place& place, const char* layer) {
  const int p = place.size();
  MF_CHECK(groups >= 1 && out % groups == 0, layer, ": ", out, " output features do not form ", groups, " groups");
  if (place.any_ranks()) return split;  // the split itself, for no number of ranks in particular
  if (split == WeightSplit::kColumns) {
    MF_CHECK(units.features >= 1 && (out / groups) % units.features == 0, layer, ": ", out / groups,
             " output features per group are not whole units of ", units.features);
    const int64_t n_units = out / groups / units.features;
    if (n_units % p != 0 && units.or_replicate) return WeightSplit::kNone;
    if (units.key)
      MF_CHECK(n_units % p == 0, "train.dist.tensor_parallel_size ", p, " must divide ", units.key, " (", n_units, ")");
    MF_CHECK(n_units % p == 0, layer, ": ", n_units, " units of ", units.features,
             " output features per group are not divisible by the ", p, " ranks splitting them");
  } else if (split == WeightSplit::kRows) {
    MF_CHECK(in % p == 0, layer, ": ", in, " input features are not divisible by the ", p, " ranks splitting them");
  }
  return p > 1 ? split : WeightSplit::kNone;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, const Place& place, bool split_rows, DType dt)
    : num_(num), dim_(dim), place_(place), split_rows_(split_rows && place.splits()) {
  MF_CHECK(!split_rows_ || num >= place.size(), "Embedding: ", num, " rows cannot be split over ", place.size(), " ranks");
  nn::ParamLayout w = split_rows_ ? nn::split_layout({num, dim}, 0) : nn::replicated_layout({num, dim});
  weight = register_parameter("weight", local_filled(w, place, dt), w);
}

GlobalTensor Embedding::stored_table() const {
  return place_.wrap(weight, split_rows_ ? place_.split_on(0) : place_.broadcast(), {num_, dim_});
}

GlobalTensor Embedding::table() const {
  return place_.wrap(nn::compute(weight), split_rows_ ? place_.split_on(0) : place_.broadcast(), {num_, dim_});
}

GlobalTensor Embedding::forward(const GlobalTensor& ids) const { return global::embedding(table(), ids); }

GlobalTensor Embedding::project(const GlobalTensor& x, const GlobalTensor& bias) const {
  return round_to(global::linear(x, table(), bias), weight.dtype());
}

int64_t Embedding::max_local_rows() const { return split_rows_ ? (num_ + place_.size() - 1) / place_.size() : num_; }

RowBias::RowBias(int64_t num, const Place& place, bool split_rows, DType dt)
    : num_(num), place_(place), split_rows_(split_rows && place.splits()) {
  nn::ParamLayout b = split_rows_ ? nn::split_layout({num}, 0) : nn::replicated_layout({num});
  bias = register_parameter("bias", local_filled(b, place, dt), b);
}

GlobalTensor RowBias::value() const {
  return place_.wrap(nn::compute(bias), split_rows_ ? place_.split_on(0) : place_.broadcast(), {num_});
}

LayerNorm::LayerNorm(int64_t dim, double eps, const Place& place, DType dt, bool rounds_input)
    : weight(register_parameter("weight", local_filled(nn::replicated_layout({dim}), place, dt, 1.0),
                                nn::replicated_layout({dim}))),
      bias(register_parameter("bias", local_filled(nn::replicated_layout({dim}), place, dt), nn::replicated_layout({dim}))),
      eps_(eps),
      rounds_input_(rounds_input),
      place_(place) {}

GlobalTensor LayerNorm::forward(const GlobalTensor& x) const {
  const GlobalTensor in = rounds_input_ ? round_to(x, weight.dtype()) : x;
  return round_to(global::layer_norm(in, place_.wrap(nn::compute(weight)), place_.wrap(nn::compute(bias)), eps_),
                  weight.dtype());
}

Conv1D::Conv1D(int64_t in, int64_t out, const Place& place, WeightSplit split, DType dt, int64_t groups,
               SplitUnits units)
    : in_(in), out_(out), groups_(groups), place_(place),
      split_(resolved_split(split, in, out, groups, units, place, "Conv1D")) {
  nn::ParamLayout w = nn::replicated_layout({in, out}), b = nn::replicated_layout({out});
  if (split_ == WeightSplit::kColumns) {
    w = groups == 1 ? nn::split_layout({in, out}, 1) : nn::grouped_split_layout({in, out}, {in, groups, out / groups}, 2);
    b = groups == 1 ? nn::split_layout({out}, 0) : nn::grouped_split_layout({out}, {groups, out / groups}, 1);
  } else if (split_ == WeightSplit::kRows) {
    w = nn::split_layout({in, out}, 0);
  }
  weight = register_parameter("weight", local_filled(w, place, dt), w);
  bias = register_parameter("bias", local_filled(b, place, dt), b);
}

GlobalTensor Conv1D::forward(const GlobalTensor& x) const {
  const DType storage = weight.dtype();
  const Tensor w = nn::compute(weight), b = nn::compute(bias);
  Shape out = x.logical_shape;
  MF_CHECK(!out.empty() && out.back() == in_, "Conv1D: x ", x.str(), " for ", in_, " input features");
  out.back() = out_;
  switch (split_) {
    case WeightSplit::kNone:
      if (groups_ == 1) return round_to(global::affine(x, place_.wrap(w), place_.wrap(b)), storage);
      break;
    case WeightSplit::kColumns: {
      // x B; the local GEMM gives this rank's output features (of each group).
      const GlobalTensor xb = global::box(x, place_.gathered(x.nd_sbp));
      Tensor y = nn::round_to(mf::affine(xb.local, w, b), storage);
      auto split_last = [&](size_t rank) {
        return place_.with(xb.nd_sbp, Place::kWeights, global::Sbp::split(static_cast<int>(rank) - 1));
      };
      if (groups_ == 1) return place_.wrap(y, split_last(out.size()), out);
      Shape grouped = out, local = y.shape();
      grouped.back() = groups_;
      grouped.push_back(out_ / groups_);
      local.back() = groups_;
      local.push_back(y.shape().back() / groups_);
      return place_.wrap(mf::reshape(y, local), split_last(grouped.size()), grouped);
    }
    case WeightSplit::kRows: {
      // Mixed precision: the f32 partial sums are reduced, then the bias added and the sum rounded.
      const GlobalTensor partial = global::affine(x, place_.wrap(w, place_.split_on(0), {in_, out_}));  // P
      return round_to(global::add(global::box(partial, place_.hidden_sbp(partial.nd_sbp)), place_.wrap(b)), storage);
    }
  }
  // One rank or no split, grouped output: the plain GEMM viewed as (..., groups, out / groups).
  GlobalTensor y = round_to(global::affine(x, place_.wrap(w), place_.wrap(b)), storage);
  Shape grouped = out;
  grouped.back() = groups_;
  grouped.push_back(out_ / groups_);
  return global::reshape(y, grouped);
}

Linear::Linear(int64_t in, int64_t out, const Place& place, WeightSplit split, DType dt, bool with_bias,
               SplitUnits units, Activation activation)
    : in_(in), out_(out), place_(place), split_(resolved_split(split, in, out, 1, units, place, "Linear")),
      whole_input_(split == WeightSplit::kColumns), activation_(activation) {
  nn::ParamLayout w = nn::replicated_layout({out, in}), b = nn::replicated_layout({out});
  if (split_ == WeightSplit::kColumns) {
    w = nn::split_layout({out, in}, 0);
    b = nn::split_layout({out}, 0);
  } else if (split_ == WeightSplit::kRows) {
    w = nn::split_layout({out, in}, 1);
  }
  weight = register_parameter("weight", local_filled(w, place, dt), w);
  if (with_bias) bias = register_parameter("bias", local_filled(b, place, dt), b);
}

GlobalTensor activate(Activation a, const GlobalTensor& x) {
  switch (a) {
    case Activation::kNone:
      return x;
    case Activation::kGeluTanh:
      return global::gelu(x, true);
    case Activation::kGelu:
      return global::gelu(x, false);
    case Activation::kRelu:
      return global::relu(global::context_of(x.placement), x);
    case Activation::kSilu:
      return global::silu(x);
    case Activation::kTanh:
      return global::tanh(x);
  }
  MF_THROW("layers: unknown activation");
}

GlobalTensor Linear::forward(const GlobalTensor& x) const {
  const GlobalTensor y = affine(x);
  return activation_ == Activation::kNone ? y : round_to(activate(activation_, y), weight.dtype());
}

GlobalTensor Linear::affine(const GlobalTensor& x) const {
  const DType storage = weight.dtype();
  const Tensor w = nn::compute(weight), b = nn::compute(bias);
  MF_CHECK(!x.logical_shape.empty() && x.logical_shape.back() == in_, "Linear: x ", x.str(), " for ", in_,
           " input features");
  const GlobalTensor no_bias;
  switch (split_) {
    case WeightSplit::kColumns: {  // x B; the local GEMM gives this rank's output features
      const GlobalTensor wg = place_.wrap(w, place_.split_on(0), {out_, in_});
      const GlobalTensor bg = bias.defined() ? place_.wrap(b, place_.split_on(0), {out_}) : no_bias;
      return round_to(global::linear(global::box(x, place_.gathered(x.nd_sbp)), wg, bg), storage);
    }
    case WeightSplit::kRows: {  // the partial sums reduced, then the bias added and the sum rounded
      const GlobalTensor partial = global::linear(x, place_.wrap(w, place_.split_on(1), {out_, in_}));  // P
      const GlobalTensor y = global::box(partial, place_.hidden_sbp(partial.nd_sbp));
      return round_to(bias.defined() ? global::add(y, place_.wrap(b)) : y, storage);
    }
    case WeightSplit::kNone:
      break;
  }
  const GlobalTensor xin = whole_input_ ? global::box(x, place_.gathered(x.nd_sbp)) : x;
  return round_to(global::linear(xin, place_.wrap(w), bias.defined() ? place_.wrap(b) : no_bias), storage);
}

Tensor ParamGroup::add_param(const std::string& name, const Shape& shape, DType dt) {
  const nn::ParamLayout l = nn::replicated_layout(shape);
  Tensor t = register_parameter(name, local_filled(l, place_, dt), l);
  own_.emplace_back(name, t);
  return t;
}

const Tensor& ParamGroup::param(const std::string& name) const {
  for (const auto& [n, t] : own_)
    if (n == name) return t;
  MF_THROW("ParamGroup: no parameter '", name, "'");
}

GlobalTensor ParamGroup::value(const std::string& name) const { return place_.wrap(nn::compute(param(name))); }

GlobalTensor ParamGroup::affine(const GlobalTensor& x, const std::string& weight, const std::string& bias) const {
  const GlobalTensor b = value(bias), w = value(weight);
  const int64_t out = b.logical_shape.at(0), in = x.logical_shape.back();
  MF_CHECK(shape_numel(w.logical_shape) == out * in, "ParamGroup: parameter '", weight, "' ", shape_str(w.logical_shape),
           " is not (", out, ", ", in, ") for x ", x.str());
  return round_to(global::linear(x, global::reshape(w, {out, in}), b), param(weight).dtype());
}

GlobalTensor ParamGroup::plus(const GlobalTensor& x, const std::string& name, const Shape& view) const {
  return round_to(global::add(x, global::reshape(value(name), view)), param(name).dtype());
}

RMSNorm::RMSNorm(int64_t dim, double eps, const Place& place, DType dt)
    : weight(register_parameter("weight", local_filled(nn::replicated_layout({dim}), place, dt, 1.0),
                                nn::replicated_layout({dim}))),
      eps_(eps),
      place_(place) {}

GlobalTensor RMSNorm::forward(const GlobalTensor& x) const {
  return round_to(global::rms_norm(x, place_.wrap(nn::compute(weight)), eps_), weight.dtype());
}

}  // namespace mf::layers
