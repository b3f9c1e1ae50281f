#include "meshflow/models/gpt2/model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"

namespace mf::models {

layers::BlockSpec gpt2_block_spec(const Gpt2Config& c) {
  layers::BlockSpec s;
  layers::AttentionSpec& a = s.attention;
  a.hidden = c.hidden_size;
  a.heads = c.num_attention_heads;
  a.qkv = layers::QkvLayout::kFusedBlocks;
  a.weights = layers::WeightLayout::kConv1D;
  a.dropout_p = c.attention_dropout_prob;
  a.fused = "c_attn";
  a.out = "c_proj";
  layers::MlpSpec& m = s.mlp;
  m.hidden = c.hidden_size;
  m.ffn = c.ffn();
  m.act = layers::Activation::kGeluTanh;
  m.weights = layers::WeightLayout::kConv1D;
  m.up = "c_fc";
  m.down = "c_proj";
  s.norm = layers::NormKind::kLayerNorm;
  s.norm_eps = c.layernorm_epsilon;
  s.dropout_p = c.output_dropout_prob;
  return s;
}

Gpt2Model::Gpt2Model(const Gpt2Config& c, const ModelContext& ctx) : Model(ctx, c.num_layers), c_(c) {
  c.validate();
  auto tr = register_module("transformer", std::make_shared<nn::ModuleGroup>());
  const layers::Place* table = embedding_place() ? embedding_place() : head_place();
  if (table)
    wte_ = tr->add("wte", std::make_shared<layers::Embedding>(c.vocab_size, c.hidden_size, *table, true, c.dtype));
  if (const layers::Place* p = embedding_place())
    wpe_ = tr->add("wpe", std::make_shared<layers::Embedding>(c.max_seq_length, c.hidden_size, *p, false, c.dtype));
  auto h = tr->add("h", std::make_shared<nn::ModuleGroup>());
  blocks_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (const layers::Place* p = layer_place(l))
      blocks_[static_cast<size_t>(l)] = h->add(std::to_string(l), std::make_shared<Gpt2Block>(c, *p));
  if (const layers::Place* p = head_place())
    ln_f_ = tr->add("ln_f", std::make_shared<layers::LayerNorm>(c.hidden_size, c.layernorm_epsilon, *p, c.dtype));
  // lm_head.weight is tied to transformer.wte.weight (not a separate parameter).
}

Tensor Gpt2Model::embedding_weight() const { return wte_ ? wte_->weight : Tensor(); }

void Gpt2Model::init_weights(uint64_t seed) {
  NoGradGuard ng;
  const double std_out = c_.initializer_range / std::sqrt(2.0 * static_cast<double>(c_.num_layers));
  MF_CHECK(std::any_of(blocks_.begin(), blocks_.end(), [](const auto& b) { return b != nullptr; }),
           "gpt2: no layer of the model on this rank");
  // Parameter k of the whole model's order draws from a generator of its own, whatever rank
  // holds it.
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  for (const nn::ParamPiece& p : parameter_pieces()) {
    const std::string& name = p.name;
    Generator g = nn::param_generator(seed, index.at(name));
    auto ends_with = [&](const char* suf) {
      std::string s(suf);
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    Tensor t = p.piece;
    if (name.find(".ln_") != std::string::npos) {
      fill_(t, ends_with(".weight") ? 1.0 : 0.0);
    } else if (ends_with(".bias")) {
      fill_(t, 0.0);
    } else {
      nn::normal_piece_(p, ends_with("c_proj.weight") ? std_out : c_.initializer_range, g);
    }
  }
}

GlobalTensor Gpt2Model::embed(const GlobalTensor& ids, const Batch& batch) const {
  const int64_t T = ids.logical_shape[1], past = batch.decode ? batch.decode->past : 0;
  MF_CHECK(T > 0 && past + T <= c_.max_seq_length, "gpt2: sequence length ", past + T,
           " must be in [1, model.max_seq_length = ", c_.max_seq_length, "]");
  // The positions: 0 .. T-1, or decoding each row's (B, T) after its cached ones.
  const Tensor positions = batch.decode ? batch.decode->positions(T) : arange(T, DType::kI64);
  const GlobalTensor pos = host_beside(ids, positions);
  GlobalTensor x = global::add(wte_->forward(ids), wpe_->forward(pos));
  x = layers::round_to(x, c_.dtype);  // (B, T, C) + (T, C)
  return global::dropout(x, training() ? c_.embedding_dropout_prob : 0.0);
}

GlobalTensor Gpt2Model::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  const layers::LayerDecode decode = batch.decode ? batch.decode->layer(layer) : layers::LayerDecode{};
  return blocks_.at(static_cast<size_t>(layer))->forward(x, recompute_inside, batch.decode ? &decode : nullptr,
                                                         key_padding_mask(batch));
}

GlobalTensor Gpt2Model::output_logits(const GlobalTensor& hidden) const {
  return layers::round_to(global::linear(hidden, wte_->table()), c_.dtype);  // (B, T, C) -> (B, T, V)
}

std::optional<CheckpointGranularity> Gpt2Model::recomputation(int64_t layer) const {
  if (!c_.checkpointed(layer)) return std::nullopt;
  return c_.checkpoint_granularity;
}

Tensor Gpt2Model::logits(const Tensor& ids) const {
  return run_whole(ids, [this](const GlobalTensor& h) { return output_logits(h); });
}

std::string Gpt2Model::describe() const { return gpt2_describe(c_); }

GlobalTensor Gpt2Model::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  // The tied embedding is the output projection. Full checkpointing recomputes each chunk's
  // logits in backward: the (N, V) logits and their gradient, the largest activation of a GPT-2
  // step, are never held whole.
  layers::LmLossOptions o;
  o.chunk_elements = c_.head_chunk_elements;
  o.recompute = c_.activation_checkpointing && c_.checkpoint_granularity == CheckpointGranularity::kFull && training();
  o.storage = c_.dtype;
  return step_share(layers::lm_loss(hidden, batch.labels, *wte_, o), static_cast<double>(counted_labels(batch.labels)), totals.at(0));
}

std::vector<nn::ParamUnit> Gpt2Model::parameter_units() const {
  return layered_units({"transformer.wte.", "transformer.wpe."}, "transformer.h.", {"transformer.ln_f.", "transformer.wte."});
}

double Gpt2Model::flops_per_token(int64_t seq_len) const {
  // The whole model's count (a share of the layers is not meaningful for MFU).
  const int64_t block = c_.hidden_size * 3 * c_.hidden_size + 3 * c_.hidden_size + c_.hidden_size * c_.hidden_size +
                        c_.hidden_size + 2 * c_.hidden_size * c_.ffn() + c_.ffn() + c_.hidden_size + 4 * c_.hidden_size;
  const int64_t whole = c_.vocab_size * c_.hidden_size + c_.num_layers * block + 2 * c_.hidden_size;
  double params = static_cast<double>(whole);  // wpe is a lookup, not counted
  return 6.0 * params + 12.0 * static_cast<double>(c_.num_layers * c_.hidden_size * seq_len);
}

}  // namespace mf::models
