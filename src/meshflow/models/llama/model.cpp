#include "meshflow/models/llama/model.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"

namespace mf::models {

namespace {

// (B, H, T, D) -> (B, H * groups, T, D): each key/value head repeated for the `groups` query heads
// that share it (Hugging Face's repeat_kv).
GlobalTensor repeat_kv(const GlobalTensor& kv, int64_t groups) {
  if (groups == 1) return kv;
  const Shape& s = kv.logical_shape;
  const int64_t B = s[0], H = s[1], T = s[2], D = s[3];
  const GlobalTensor one = global::reshape(kv, {B, H, 1, T, D});
  return global::reshape(global::expand(one, {B, H, groups, T, D}), {B, H * groups, T, D});
}

}  // namespace

LlamaBlock::LlamaBlock(const LlamaConfig& c, const layers::Place& place) : c_(c), inv_freq_(c.rope_inv_freq()) {
  using layers::WeightSplit;
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size, D = c.dim(), Q = c.num_attention_heads * D, KV = c.kv_heads() * D;
  input_norm_ = register_module("input_layernorm", std::make_shared<layers::RMSNorm>(C, c.rms_norm_eps, place, dt));
  auto attn = register_module("self_attn", std::make_shared<nn::ModuleGroup>());
  const layers::SplitUnits q_heads{D, "model.num_attention_heads"};
  // Key/value heads split like the query heads they serve, or whole on every rank when the
  // ranks do not divide them.
  const layers::SplitUnits kv_heads{D, "model.num_key_value_heads", true};
  q_ = attn->add("q_proj", std::make_shared<layers::Linear>(C, Q, place, WeightSplit::kColumns, dt, c.qkv_bias, q_heads));
  k_ = attn->add("k_proj", std::make_shared<layers::Linear>(C, KV, place, WeightSplit::kColumns, dt, c.qkv_bias, kv_heads));
  v_ = attn->add("v_proj", std::make_shared<layers::Linear>(C, KV, place, WeightSplit::kColumns, dt, c.qkv_bias, kv_heads));
  o_ = attn->add("o_proj", std::make_shared<layers::Linear>(Q, C, place, WeightSplit::kRows, dt, false));
  post_norm_ = register_module("post_attention_layernorm", std::make_shared<layers::RMSNorm>(C, c.rms_norm_eps, place, dt));
  auto mlp = register_module("mlp", std::make_shared<nn::ModuleGroup>());
  const int64_t F = c.ffn_hidden_size;
  const layers::SplitUnits ffn{1, "model.ffn_hidden_size"};
  gate_ = mlp->add("gate_proj", std::make_shared<layers::Linear>(C, F, place, WeightSplit::kColumns, dt, false, ffn));
  up_ = mlp->add("up_proj", std::make_shared<layers::Linear>(C, F, place, WeightSplit::kColumns, dt, false, ffn));
  down_ = mlp->add("down_proj", std::make_shared<layers::Linear>(F, C, place, WeightSplit::kRows, dt, false));
}

GlobalTensor LlamaBlock::heads(const layers::Linear& proj, const GlobalTensor& x, int64_t n, bool rotate,
                               const DecodeState* decode) const {
  const int64_t B = x.logical_shape[0], T = x.logical_shape[1];
  GlobalTensor h = global::permute(global::reshape(proj.forward(x), {B, T, n, c_.dim()}), {0, 2, 1, 3});
  if (!rotate) return h;  // (B, n, T, D)
  const GlobalTensor r = decode ? global::rope(h, inv_freq_, decode->row_offsets()) : global::rope(h, inv_freq_);
  return layers::round_to(r, c_.settings.dtype);
}

GlobalTensor LlamaBlock::forward(const GlobalTensor& x, bool recompute_attention, const DecodeState* decode,
                                 int64_t layer, const Tensor& key_padding) const {
  using layers::round_to;
  const DType st = c_.settings.dtype;
  const int64_t B = x.logical_shape[0], T = x.logical_shape[1], H = c_.num_attention_heads;
  const GlobalTensor xn = input_norm_->forward(x);
  const GlobalTensor q = heads(*q_, xn, H, true, decode);
  GlobalTensor k = heads(*k_, xn, c_.kv_heads(), true, decode), v = heads(*v_, xn, c_.kv_heads(), false, decode);
  // Decoding: the cached positions' keys and values and these (B, kv heads, past + T, D), cached
  // once per key/value head.
  if (decode) std::tie(k, v) = decode->attend(layer, k, v);
  AttentionOptions opts;
  opts.causal = true;
  opts.window = c_.sliding_window;
  opts.dropout_p = training() ? c_.attention_dropout_prob : 0.0;
  opts.key_padding_mask = key_padding;
  // The attention core: q (B, H, T, D), k and v (B, kv heads, T, D) -> (B, H, T, D). Its dropout
  // takes the next stream of the default generator, which checkpoint() replays.
  const int64_t groups = H / c_.kv_heads();
  auto core = [opts, groups](const std::vector<GlobalTensor>& in) {
    return std::vector<GlobalTensor>{global::attention(in[0], repeat_kv(in[1], groups), repeat_kv(in[2], groups), opts)};
  };
  GlobalTensor y = recompute_attention && q.local.requires_grad() ? global::checkpoint(core, {q, k, v})[0] : core({q, k, v})[0];
  y = round_to(global::reshape(global::permute(y, {0, 2, 1, 3}), {B, T, H * c_.dim()}), st);  // a view
  const GlobalTensor h = round_to(global::add(x, o_->forward(y)), st);
  const GlobalTensor hn = post_norm_->forward(h);
  const GlobalTensor act = round_to(global::silu(gate_->forward(hn)), st);
  const GlobalTensor m = down_->forward(round_to(global::mul(act, up_->forward(hn)), st));
  return round_to(global::add(h, m), st);
}

LlamaModel::LlamaModel(const LlamaConfig& c, const ModelContext& ctx) : Model(ctx, c.num_layers), c_(c) {
  c.validate();
  const DType dt = c.settings.dtype;
  auto model = register_module("model", std::make_shared<nn::ModuleGroup>());
  // The token embedding: on the first rank of the model, and on the last as its output
  // projection when the two are tied.
  const layers::Place* table = embedding_place() ? embedding_place() : c.tie_word_embeddings ? head_place() : nullptr;
  if (table)
    embed_tokens_ = model->add("embed_tokens", std::make_shared<layers::Embedding>(c.vocab_size, c.hidden_size, *table, true, dt));
  auto group = model->add("layers", std::make_shared<nn::ModuleGroup>());
  blocks_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (const layers::Place* p = layer_place(l))
      blocks_[static_cast<size_t>(l)] = group->add(std::to_string(l), std::make_shared<LlamaBlock>(c, *p));
  if (const layers::Place* p = head_place()) {
    norm_ = model->add("norm", std::make_shared<layers::RMSNorm>(c.hidden_size, c.rms_norm_eps, *p, dt));
    if (!c.tie_word_embeddings)
      lm_head_ = register_module("lm_head", std::make_shared<layers::Embedding>(c.vocab_size, c.hidden_size, *p, true, dt));
  }
}

void LlamaModel::init_weights(uint64_t seed) {
  NoGradGuard ng;
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  for (const nn::ParamPiece& p : parameter_pieces()) {
    Generator g = nn::param_generator(seed, index.at(p.name));
    auto ends_with = [&](const std::string& suf) {
      return p.name.size() >= suf.size() && p.name.compare(p.name.size() - suf.size(), suf.size(), suf) == 0;
    };
    Tensor t = p.piece;
    if (ends_with("norm.weight"))
      fill_(t, 1.0);
    else if (ends_with(".bias"))
      fill_(t, 0.0);
    else
      nn::normal_piece_(p, c_.initializer_range, g);
  }
}

std::vector<std::string> LlamaModel::tied_parameters() const {
  if (!c_.tie_word_embeddings) return {};
  return {"model.embed_tokens.weight"};
}

GlobalTensor LlamaModel::embed(const GlobalTensor& ids, const Batch& batch) const {
  const int64_t T = ids.logical_shape[1] + (batch.decode ? batch.decode->past : 0);
  MF_CHECK(T > 0 && T <= c_.max_seq_length, llama_variant_name(c_.variant), ": sequence length ", T,
           " must be in [1, model.max_seq_length = ", c_.max_seq_length, "]");
  return embed_tokens_->forward(ids);  // (B, T, C)
}

GlobalTensor LlamaModel::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  return blocks_.at(static_cast<size_t>(layer))->forward(x, recompute_inside, batch.decode, layer, key_padding_mask(batch));
}

GlobalTensor LlamaModel::output_logits(const GlobalTensor& hidden) const {
  return layers::round_to(global::linear(hidden, output_table().table()), c_.settings.dtype);  // (B, T, C) -> (B, T, V)
}

std::optional<CheckpointGranularity> LlamaModel::recomputation(int64_t layer) const {
  if (!c_.settings.recomputes(layer, c_.num_layers)) return std::nullopt;
  return c_.settings.granularity;
}

GlobalTensor LlamaModel::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  layers::LmLossOptions o;
  o.chunk_elements = c_.head_chunk_elements;
  o.recompute = c_.settings.recompute && c_.settings.granularity == CheckpointGranularity::kFull && training();
  o.storage = c_.settings.dtype;
  return step_share(layers::lm_loss(hidden, batch.labels, output_table(), o), static_cast<double>(counted_labels(batch.labels)), totals.at(0));
}

Tensor LlamaModel::logits(const Tensor& ids) const {
  return run_whole(ids, [this](const GlobalTensor& h) { return output_logits(h); });
}

std::vector<nn::ParamUnit> LlamaModel::parameter_units() const {
  if (c_.tie_word_embeddings)
    return layered_units({"model.embed_tokens."}, "model.layers.", {"model.norm.", "model.embed_tokens."});
  return layered_units({"model.embed_tokens."}, "model.layers.", {"model.norm.", "lm_head."});
}

double LlamaModel::flops_per_token(int64_t seq_len) const {
  double params = 0.0;
  for (const auto& [name, shape] : parameter_shapes())
    if (name != "model.embed_tokens.weight" || c_.tie_word_embeddings) params += static_cast<double>(shape_numel(shape));
  const double attention = 12.0 * static_cast<double>(c_.num_layers * c_.num_attention_heads * c_.dim() * seq_len);
  return 6.0 * params + attention;
}

}  // namespace mf::models
