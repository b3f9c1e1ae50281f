#include "meshflow/layers/attention.h"

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "meshflow/core/error.h"

namespace mf::layers {

namespace {

// (B, KV, T, D) -> (B, KV * groups, T, D): each key/value head repeated for the `groups` query
// heads that share it (Hugging Face's repeat_kv).
GlobalTensor repeat_kv(const GlobalTensor& kv, int64_t groups) {
  if (groups == 1) return kv;
  const Shape& s = kv.logical_shape;
  const int64_t B = s[0], H = s[1], T = s[2], D = s[3];
  const GlobalTensor one = global::reshape(kv, {B, H, 1, T, D});
  return global::reshape(global::expand(one, {B, H, groups, T, D}), {B, H * groups, T, D});
}

// (B, T, n, D) -> (B, n, T, D), a view.
GlobalTensor head_major(const GlobalTensor& x) { return global::permute(x, {0, 2, 1, 3}); }

std::shared_ptr<Projection> projection(const AttentionSpec& s, int64_t in, int64_t out, const Place& place,
                                       WeightSplit split, DType dt, bool bias, SplitUnits units, int64_t groups = 1) {
  if (s.weights == WeightLayout::kConv1D) {
    MF_CHECK(bias, "attention: Conv1D projections always have a bias");
    return std::make_shared<Conv1D>(in, out, place, split, dt, groups, units);
  }
  MF_CHECK(groups == 1, "attention: a Linear projection has no column groups");
  return std::make_shared<Linear>(in, out, place, split, dt, bias, units);
}

// The most negative finite value of a compute dtype: what a hidden score becomes.
double lowest(DType dt) {
  if (dt == DType::kF64) return std::numeric_limits<double>::lowest();
  if (dt == DType::kF16) return -65504.0;
  return std::numeric_limits<float>::lowest();
}

// The scores a query may not see, bool (B or 1, 1, Tq or 1, Tk) on the host: padded keys
// (key_padding (B, Tk), true = padding) and, causal, the keys after the query (aligned at the
// end, as AttentionOptions::causal); undefined when none is hidden.
Tensor hidden_scores(const Tensor& key_padding, int64_t tq, int64_t tk, bool causal) {
  if (!key_padding.defined() && !causal) return Tensor();
  const Tensor& pad = key_padding;  // on the host, as the batch holds it
  MF_CHECK(!pad.defined() || (pad.ndim() == 2 && pad.shape(1) == tk && pad.dtype() == DType::kBool && pad.is_contiguous()),
           "attention: key padding ", pad.defined() ? pad.str() : "", " must be bool (batch, ", tk, ")");
  const int64_t b = pad.defined() ? pad.shape(0) : 1, rows = causal ? tq : 1;
  Tensor out = zeros({b, 1, rows, tk}, DType::kBool);
  bool* m = out.data<bool>();
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < tk; ++j)
        m[(r * rows + i) * tk + j] = (causal && j > i + tk - tq) || (pad.defined() && pad.data<bool>()[r * tk + j]);
  return out;
}

// The core unfused, so that a bias reaches its gradient: q (B, H, Tq, D), k and v (B, H, Tk, D)
// [, bias (H, Tq, Tk), or undefined] -> (B, H, Tq, D). Hidden scores become the dtype's lowest
// value (exp gives 0 exactly); the dropout takes the next stream, which checkpoint() replays.
GlobalTensor eager_attention(const GlobalTensor& q, const GlobalTensor& k, const GlobalTensor& v,
                              const GlobalTensor& bias, const AttentionOptions& o) {
  MF_CHECK(o.window == 0, "attention: the unfused core (a bias on the scores, or eager) has no sliding window");
  const int64_t Tq = q.logical_shape[2], Tk = k.logical_shape[2], D = q.logical_shape[3];
  const global::GlobalContext ctx = global::context_of(q.placement);
  GlobalTensor s = global::matmul(ctx, q, global::transpose(ctx, k, 2, 3));  // (B, H, Tq, Tk)
  const double scale = o.scale > 0.0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(D));
  if (scale != 1.0) s = global::scale(ctx, s, scale);
  if (bias.placement) s = global::add(s, bias);
  const Tensor hidden = hidden_scores(o.key_padding_mask, Tq, Tk, o.causal);
  if (hidden.defined())
    s = global::map(s, "attention_mask", [hidden](const Tensor& t) {
      MF_CHECK(hidden.shape(0) == 1 || t.shape(0) == hidden.shape(0), "attention: scores ", t.str(), " for a mask of ",
               hidden.str());
      return masked_fill(t, to(hidden, t.device()), lowest(t.dtype()));
    });
  GlobalTensor w = global::softmax(ctx, s);
  if (o.dropout_p > 0.0) w = global::dropout(w, o.dropout_p);
  return global::matmul(ctx, w, v);
}

}  // namespace

std::shared_ptr<nn::ModuleGroup> group_at(nn::ModuleGroup& parent, const std::string& path) {
  std::shared_ptr<nn::ModuleGroup> g;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string name = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    g = (g ? *g : parent).group(name);
    if (dot == std::string::npos) return g;
    start = dot + 1;
  }
}

Attention::Attention(const AttentionSpec& spec, nn::ModuleGroup& parent, const Place& place, DType dt)
    : s_(spec), dtype_(dt), place_(place) {
  const int64_t C = s_.hidden, H = s_.heads, KV = s_.kv(), D = s_.dim();
  MF_CHECK(H > 0 && D > 0 && (s_.head_dim > 0 || C % H == 0), s_.heads_key, " ", H, " must divide model.hidden_size ", C);
  MF_CHECK(KV > 0 && H % KV == 0, s_.kv_heads_key, " ", KV, " must divide ", s_.heads_key, " ", H);
  const int64_t R = s_.rotary_dims > 0 ? s_.rotary_dims : D;
  MF_CHECK(s_.rotary_inv_freq.empty() || (R % 2 == 0 && R <= D && static_cast<int64_t>(s_.rotary_inv_freq.size()) * 2 == R),
           "attention: ", s_.rotary_inv_freq.size(), " rotary frequencies for ", R, " rotated features of a ", D,
           "-feature head");
  const SplitUnits q_heads{D, s_.heads_key};
  // Key/value heads split like the query heads they serve, or whole on every rank when the ranks
  // do not divide them.
  const SplitUnits kv_heads{D, s_.kv_heads_key, true};
  using W = WeightSplit;
  switch (s_.qkv) {
    case QkvLayout::kSeparate:
      q_ = add_at(parent, s_.q, projection(s_, C, H * D, place, W::kColumns, dt, s_.qkv_bias, q_heads));
      k_ = add_at(parent, s_.k, projection(s_, C, KV * D, place, W::kColumns, dt, s_.qkv_bias, kv_heads));
      v_ = add_at(parent, s_.v, projection(s_, C, KV * D, place, W::kColumns, dt, s_.qkv_bias, kv_heads));
      break;
    case QkvLayout::kFusedBlocks:  // (C, 3 C): three column blocks, each split by whole heads
      MF_CHECK(KV == H, "attention: a fused q|k|v projection has as many key/value heads as heads");
      fused_ = add_at(parent, s_.fused, projection(s_, C, 3 * H * D, place, W::kColumns, dt, s_.qkv_bias, q_heads, 3));
      break;
    case QkvLayout::kFusedPerHead:  // (3 C, C): whole heads of 3 D output features
      MF_CHECK(KV == H, "attention: a fused per-head q, k, v projection has as many key/value heads as heads");
      fused_ = add_at(parent, s_.fused,
                      projection(s_, C, 3 * H * D, place, W::kColumns, dt, s_.qkv_bias, SplitUnits{3 * D, s_.heads_key}));
      break;
  }
  out_ = add_at(parent, s_.out, projection(s_, H * D, C, place, W::kRows, dt, s_.out_bias, {}));
}

GlobalTensor Attention::rotate(const GlobalTensor& h, const LayerDecode* decode) const {
  const int64_t D = s_.dim(), R = s_.rotary_dims > 0 ? s_.rotary_dims : D;
  auto rope = [&](const GlobalTensor& t) {
    return decode ? global::rope(t, s_.rotary_inv_freq, *decode->row_offsets) : global::rope(t, s_.rotary_inv_freq);
  };
  if (R == D) return round_to(rope(h), dtype_);
  // Partial rotary (GPT-NeoX's rotary_pct): the first R features rotated, the rest as they are.
  return round_to(global::cat({rope(global::narrow(h, 3, 0, R)), global::narrow(h, 3, R, D - R)}, 3), dtype_);
}

GlobalTensor Attention::forward(const GlobalTensor& x, bool training, bool recompute, const AttentionInputs& in,
                                const GlobalTensor& memory) const {
  const int64_t B = x.logical_shape[0], T = x.logical_shape[1], H = s_.heads, KV = s_.kv(), D = s_.dim();
  const bool cross = memory.placement != nullptr;
  const LayerDecode* decode = in.decode;
  MF_CHECK(!cross || (s_.qkv == QkvLayout::kSeparate && s_.rotary_inv_freq.empty() && !decode),
           "attention: cross-attention takes separate q, k, v projections, no rotary and no decoding");
  MF_CHECK(in.bias.placement == nullptr || !decode, "attention: a bias on the scores while decoding is not supported");
  AttentionOptions opts;
  opts.causal = s_.causal;
  opts.window = s_.window;
  opts.scale = s_.scale;
  opts.dropout_p = training ? s_.dropout_p : 0.0;
  opts.key_padding_mask = in.key_padding;
  const int64_t groups = H / KV;
  const bool biased = in.bias.placement != nullptr;
  MF_CHECK(place_.size(Place::kSequence) == 1 || (!biased && !s_.eager),
           "attention: the unfused core (a bias on the scores such as T5's relative positions, or eager) does not run "
           "with the sequence split (train.dist.context_parallel_size ", place_.size(Place::kSequence),
           "); use context_parallel_size=1 for this model");
  // q (B, H, T, D), k and v (B, KV, Tk, D)[, bias (H, T, Tk)] -> (B, H, T, D). Decoding: the keys
  // and values are the cached positions' and these (B, KV, past + T, D), cached once per
  // key/value head. The dropout takes the next stream of the default generator, which
  // checkpoint() replays.
  const Place* place = &place_;
  auto attend = [opts, groups, decode, eager = s_.eager, place](const std::vector<GlobalTensor>& t) {  // q, k, v[, bias]
    GlobalTensor q = t[0], k = t[1], v = t[2];
    if (decode) std::tie(k, v) = decode->attend(k, v);
    k = repeat_kv(k, groups);
    v = repeat_kv(v, groups);
    if (t.size() == 3 && !eager) {
      // The sequence traded for the heads around the core (all-to-alls), or the ring.
      const global::NdSbp* core = place->attention_sbp(q.nd_sbp);
      if (core == q.nd_sbp) return global::attention(q, k, v, opts);
      const global::NdSbp* back = q.nd_sbp;
      return global::box(global::attention(global::box(q, core), global::box(k, place->attention_sbp(k.nd_sbp)),
                                           global::box(v, place->attention_sbp(v.nd_sbp)), opts),
                         back);
    }
    return eager_attention(q, k, v, t.size() > 3 ? t[3] : GlobalTensor{}, opts);
  };
  const bool rotary = !s_.rotary_inv_freq.empty();
  global::GlobalFn core;
  std::vector<GlobalTensor> inputs;
  if (s_.qkv == QkvLayout::kFusedBlocks && !rotary && !biased && !s_.eager) {
    // The core starts at the fused projection's output (B, T, 3, H, D): what recomputation keeps.
    inputs = {global::reshape(fused_->forward(x), {B, T, 3, H, D})};
    core = [attend](const std::vector<GlobalTensor>& t) {
      std::vector<GlobalTensor> q_k_v = global::unbind(t[0], 2);  // 3 x (B, T, H, D)
      for (GlobalTensor& h : q_k_v) h = head_major(h);
      return std::vector<GlobalTensor>{attend(q_k_v)};
    };
  } else {
    GlobalTensor q, k, v;
    if (s_.qkv == QkvLayout::kSeparate) {
      const GlobalTensor& kv_in = cross ? memory : x;
      const int64_t Tk = kv_in.logical_shape[1];
      auto heads = [&](const Projection& p, const GlobalTensor& from, int64_t t, int64_t n) {
        return head_major(global::reshape(p.forward(from), {B, t, n, D}));
      };
      q = heads(*q_, x, T, H);
      k = heads(*k_, kv_in, Tk, KV);
      v = heads(*v_, kv_in, Tk, KV);
    } else {
      // kFusedBlocks: (B, T, 3, H, D), the three blocks on axis 2; kFusedPerHead: (B, T, H, 3, D),
      // each head's q, k, v on axis 3.
      const bool blocks = s_.qkv == QkvLayout::kFusedBlocks;
      const GlobalTensor y = global::reshape(fused_->forward(x), blocks ? Shape{B, T, 3, H, D} : Shape{B, T, H, 3, D});
      const std::vector<GlobalTensor> q_k_v = global::unbind(y, blocks ? 2 : 3);  // 3 x (B, T, H, D)
      q = head_major(q_k_v[0]);
      k = head_major(q_k_v[1]);
      v = head_major(q_k_v[2]);
    }
    if (rotary) {
      q = rotate(q, decode);
      k = rotate(k, decode);
    }
    inputs = {q, k, v};
    if (biased) inputs.push_back(in.bias);
    core = [attend](const std::vector<GlobalTensor>& t) { return std::vector<GlobalTensor>{attend(t)}; };
  }
  GlobalTensor y = recompute && inputs[0].local.requires_grad() ? global::checkpoint(core, inputs)[0] : core(inputs)[0];
  // (B, H, T, D) -> (B, T, H D): a view; the attention output is stored (B, T, H, D).
  y = round_to(global::reshape(head_major(y), {B, T, H * D}), dtype_);
  return out_->forward(y);
}

}  // namespace mf::layers
