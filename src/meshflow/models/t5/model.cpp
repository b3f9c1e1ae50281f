#include "meshflow/models/t5/model.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"

namespace mf::models {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The most negative finite value of a compute dtype: what a hidden score becomes.
double lowest(DType dt) {
  if (dt == DType::kF64) return std::numeric_limits<double>::lowest();
  if (dt == DType::kF16) return -65504.0;
  return std::numeric_limits<float>::lowest();
}

// The keys each query may not see, (B, 1, Tq, Tk) bool on the host: padded keys (`keys` (B, Tk)
// of 1 = real, or undefined) and, causal, the keys after the query.
Tensor hidden_keys(const Tensor& keys, int64_t b, int64_t tq, int64_t tk, bool causal) {
  if (!keys.defined() && !causal) return Tensor();
  Tensor out = zeros({b, 1, tq, tk}, DType::kBool);
  bool* m = out.data<bool>();
  const Tensor k = keys.defined() ? host_i64(keys) : Tensor();
  MF_CHECK(!k.defined() || k.shape() == Shape({b, tk}), "t5: attention mask ", k.defined() ? k.str() : "", " must be (",
           b, ", ", tk, ")");
  for (int64_t r = 0; r < b; ++r)
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        m[(r * tq + i) * tk + j] = (causal && j > i) || (k.defined() && k.data<int64_t>()[r * tk + j] == 0);
  return out;
}

}  // namespace

Tensor t5_relative_buckets(int64_t tq, int64_t tk, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  Tensor out = empty({tq, tk}, DType::kI64);
  int64_t* p = out.data<int64_t>();
  const int64_t nb = bidirectional ? num_buckets / 2 : num_buckets, max_exact = nb / 2;
  // Hugging Face computes the logarithmic buckets in float32; so does this, to land in the same ones.
  const float log_span = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) {
      const int64_t rel = j - i;  // memory position - query position
      int64_t bucket = 0, n = 0;
      if (bidirectional) {
        bucket = rel > 0 ? nb : 0;
        n = rel < 0 ? -rel : rel;
      } else {
        n = rel < 0 ? -rel : 0;
      }
      if (n < max_exact) {
        bucket += n;
      } else {
        const float v = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) / log_span *
                        static_cast<float>(nb - max_exact);
        bucket += std::min<int64_t>(nb - 1, max_exact + static_cast<int64_t>(v));
      }
      p[i * tk + j] = bucket;
    }
  return out;
}

// ---- attention

T5Attention::T5Attention(const T5Config& c, const layers::Place& place) : c_(c) {
  using layers::WeightSplit;
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size, I = c.inner_dim();
  const layers::SplitUnits heads{c.head_dim, "model.num_attention_heads"};
  q_ = register_module("q", std::make_shared<layers::Linear>(C, I, place, WeightSplit::kColumns, dt, false, heads));
  k_ = register_module("k", std::make_shared<layers::Linear>(C, I, place, WeightSplit::kColumns, dt, false, heads));
  v_ = register_module("v", std::make_shared<layers::Linear>(C, I, place, WeightSplit::kColumns, dt, false, heads));
  o_ = register_module("o", std::make_shared<layers::Linear>(I, C, place, WeightSplit::kRows, dt, false));
}

GlobalTensor T5Attention::forward(const GlobalTensor& x, const GlobalTensor& kv, const GlobalTensor& bias,
                                  const Tensor& masked, bool recompute) const {
  const int64_t B = x.logical_shape[0], Tq = x.logical_shape[1], Tk = kv.logical_shape[1];
  const int64_t H = c_.num_attention_heads, D = c_.head_dim;
  auto heads = [&](const layers::Linear& proj, const GlobalTensor& in, int64_t t) {  // (B, t, C) -> (B, H, t, D)
    return global::permute(global::reshape(proj.forward(in), {B, t, H, D}), {0, 2, 1, 3});
  };
  const GlobalTensor q = heads(*q_, x, Tq), k = heads(*k_, kv, Tk), v = heads(*v_, kv, Tk);
  const double p = training() ? c_.attention_dropout_prob : 0.0;
  // The core: q (B, H, Tq, D), k and v (B, H, Tk, D)[, bias (H, Tq, Tk)] -> (B, H, Tq, D). No
  // 1/sqrt(D): T5 folds it into q's initialisation. Hidden scores become the dtype's lowest value
  // (exp gives 0 exactly); the dropout takes the next stream, which checkpoint() replays.
  auto core = [p, masked](const std::vector<GlobalTensor>& in) {
    const global::GlobalContext ctx = global::context_of(in[0].placement);
    GlobalTensor s = global::matmul(ctx, in[0], global::transpose(ctx, in[1], 2, 3));  // (B, H, Tq, Tk)
    if (in.size() > 3) s = global::add(s, in[3]);
    if (masked.defined())
      s = global::map(s, "t5_mask", [masked](const Tensor& t) {
        MF_CHECK(t.shape(0) == masked.shape(0), "t5: attention scores ", t.str(), " for a mask of ", masked.str());
        return masked_fill(t, to(masked, t.device()), lowest(t.dtype()));
      });
    const GlobalTensor w = global::dropout(global::softmax(ctx, s), p);
    return std::vector<GlobalTensor>{global::matmul(ctx, w, in[2])};
  };
  std::vector<GlobalTensor> in = {q, k, v};
  if (bias.local.defined()) in.push_back(bias);
  GlobalTensor y = recompute && q.local.requires_grad() ? global::checkpoint(core, in)[0] : core(in)[0];
  y = layers::round_to(global::reshape(global::permute(y, {0, 2, 1, 3}), {B, Tq, H * D}), c_.settings.dtype);
  return o_->forward(y);
}

// ---- blocks

T5Block::T5Block(const T5Config& c, const layers::Place& place, bool decoder) : c_(c), decoder_(decoder) {
  using layers::WeightSplit;
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size, F = c.ffn_hidden_size;
  const double eps = c.layernorm_epsilon;
  auto layer = register_module("layer", std::make_shared<nn::ModuleGroup>());
  auto l0 = layer->add("0", std::make_shared<nn::ModuleGroup>());
  self_ = l0->add("SelfAttention", std::make_shared<T5Attention>(c, place));
  self_norm_ = l0->add("layer_norm", std::make_shared<layers::RMSNorm>(C, eps, place, dt));
  if (decoder) {
    auto l1 = layer->add("1", std::make_shared<nn::ModuleGroup>());
    cross_ = l1->add("EncDecAttention", std::make_shared<T5Attention>(c, place));
    cross_norm_ = l1->add("layer_norm", std::make_shared<layers::RMSNorm>(C, eps, place, dt));
  }
  auto lf = layer->add(decoder ? "2" : "1", std::make_shared<nn::ModuleGroup>());
  auto dense = lf->add("DenseReluDense", std::make_shared<nn::ModuleGroup>());
  const layers::SplitUnits units{1, "model.ffn_hidden_size"};
  wi_ = dense->add(c.gated_gelu ? "wi_0" : "wi",
                   std::make_shared<layers::Linear>(C, F, place, WeightSplit::kColumns, dt, false, units));
  if (c.gated_gelu)
    wi_1_ = dense->add("wi_1", std::make_shared<layers::Linear>(C, F, place, WeightSplit::kColumns, dt, false, units));
  wo_ = dense->add("wo", std::make_shared<layers::Linear>(F, C, place, WeightSplit::kRows, dt, false));
  mlp_norm_ = lf->add("layer_norm", std::make_shared<layers::RMSNorm>(C, eps, place, dt));
}

GlobalTensor T5Block::mlp(const GlobalTensor& x) const {
  using layers::round_to;
  const DType st = c_.settings.dtype;
  GlobalTensor h;
  if (c_.gated_gelu)  // gelu_new (the tanh form) of wi_0 x, times wi_1 x
    h = global::mul(round_to(global::gelu(wi_->forward(x), true), st), wi_1_->forward(x));
  else
    h = global::relu(global::context_of(x.placement), wi_->forward(x));
  h = global::dropout(round_to(h, st), training() ? c_.output_dropout_prob : 0.0);
  return wo_->forward(h);
}

GlobalTensor T5Block::forward(const GlobalTensor& x, const GlobalTensor& bias, const Tensor& masked,
                              const GlobalTensor& enc, const Tensor& enc_masked, bool recompute_attention) const {
  using layers::round_to;
  const DType st = c_.settings.dtype;
  const double p = training() ? c_.output_dropout_prob : 0.0;
  const GlobalTensor n0 = self_norm_->forward(x);
  GlobalTensor h = round_to(global::add(x, global::dropout(self_->forward(n0, n0, bias, masked, recompute_attention), p)), st);
  if (decoder_) {
    const GlobalTensor n1 = cross_norm_->forward(h);
    h = round_to(global::add(h, global::dropout(cross_->forward(n1, enc, GlobalTensor{}, enc_masked, recompute_attention), p)), st);
  }
  return round_to(global::add(h, global::dropout(mlp(mlp_norm_->forward(h)), p)), st);
}

// ---- the model

T5Model::T5Model(const T5Config& c, const ModelContext& ctx) : Model(ctx, c.total_layers()), c_(c) {
  c.validate();
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size, Le = c.num_layers;
  // The shared embedding (both inputs), also the output projection when tied.
  const layers::Place& table = c.tie_word_embeddings ? shared_placement() : embedding_placement();
  shared_ = register_module("shared", std::make_shared<layers::Embedding>(c.vocab_size, C, table, true, dt));
  for (const bool decoder : {false, true}) {
    auto stack = register_module(decoder ? "decoder" : "encoder", std::make_shared<nn::ModuleGroup>());
    auto group = stack->add("block", std::make_shared<nn::ModuleGroup>());
    const int64_t first = decoder ? Le : 0, n = decoder ? c.num_decoder_layers : Le;
    for (int64_t j = 0; j < n; ++j)
      blocks_.push_back(group->add(std::to_string(j), std::make_shared<T5Block>(c, layer_placement(first + j), decoder)));
    // This stack's bias table, block 0's, used by every block of the stack.
    auto t = std::make_shared<layers::Embedding>(c.relative_attention_num_buckets, c.num_attention_heads,
                                                 layers_placement(first, first + n), false, dt);
    blocks_[static_cast<size_t>(first)]->self_attention().hold_table(t);
    (decoder ? dec_table_ : enc_table_) = t;
    // The encoder's final norm runs in decoder block 0, the decoder's in the head.
    auto norm = stack->add("final_layer_norm", std::make_shared<layers::RMSNorm>(
                                                   C, c.layernorm_epsilon, decoder ? head_placement() : layer_placement(Le), dt));
    (decoder ? dec_final_norm_ : enc_final_norm_) = norm;
  }
  if (!c.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<layers::Embedding>(c.vocab_size, C, head_placement(), true, dt));
}

void T5Model::init_weights(uint64_t seed) {
  NoGradGuard ng;
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  const double f = c_.initializer_factor, C = static_cast<double>(c_.hidden_size);
  for (const nn::ParamPiece& p : parameter_pieces()) {
    Generator g = nn::param_generator(seed, index.at(p.name));
    double std = 0.0;
    if (ends_with(p.name, "layer_norm.weight")) {
      Tensor t = p.piece;
      fill_(t, 1.0);
      continue;
    }
    if (p.name == "shared.weight" || p.name == "lm_head.weight")
      std = f;
    else if (ends_with(p.name, ".q.weight"))
      std = f / std::sqrt(C * static_cast<double>(c_.head_dim));
    else if (ends_with(p.name, ".o.weight"))
      std = f / std::sqrt(static_cast<double>(c_.inner_dim()));
    else if (ends_with(p.name, ".wo.weight"))
      std = f / std::sqrt(static_cast<double>(c_.ffn_hidden_size));
    else  // k, v, wi, wi_0, wi_1, the bias tables
      std = f / std::sqrt(C);
    nn::normal_piece_(p, std, g);
  }
}

std::vector<std::string> T5Model::tied_parameters() const {
  std::vector<std::string> t = {t5_bias_table(false), t5_bias_table(true)};
  if (c_.tie_word_embeddings) t.push_back("shared.weight");
  return t;
}

std::vector<nn::ParamUnit> T5Model::parameter_units() const {
  const int64_t Le = c_.num_layers;
  // Each block's unit holds its stack's bias table too (every block computes its bias from it);
  // decoder block 0's the encoder's final norm.
  return layered_units(
      {"shared."},
      [Le](int64_t l) {
        const bool decoder = l >= Le;
        std::vector<std::string> p = {std::string(decoder ? "decoder" : "encoder") + ".block." +
                                          std::to_string(decoder ? l - Le : l) + ".",
                                      t5_bias_table(decoder)};
        if (l == Le) p.push_back("encoder.final_layer_norm.");
        return p;
      },
      {"decoder.final_layer_norm.", c_.tie_word_embeddings ? "shared." : "lm_head."});
}

double T5Model::flops_per_token(int64_t seq_len) const {
  const double te = static_cast<double>(seq_len), td = static_cast<double>(c_.decoder_seq_length);
  double enc = 0, dec = 0;
  for (const auto& [name, shape] : parameter_shapes()) {
    if (name == "shared.weight" || name.find("relative_attention_bias") != std::string::npos) continue;
    const double n = static_cast<double>(shape_numel(shape));
    (starts_with(name, "encoder.") ? enc : dec) += n;
  }
  dec += static_cast<double>(c_.vocab_size * c_.hidden_size);  // the output projection (tied or not)
  const double inner = static_cast<double>(c_.inner_dim());
  const double attention = 12.0 * inner *
                           (static_cast<double>(c_.num_layers) * te * te +
                            static_cast<double>(c_.num_decoder_layers) * (td * td + td * te));
  return (6.0 * (enc * te + dec * td) + attention) / te;
}

GlobalTensor T5Model::embed(const GlobalTensor& ids, const Batch& batch) const {
  const int64_t B = ids.logical_shape[0];
  MF_CHECK(batch.decoder_input_ids.defined() && batch.decoder_input_ids.ndim() == 2 &&
               batch.decoder_input_ids.shape(0) == B,
           "t5: decoder_input_ids must be (batch, decoder seq) for the ", B, " rows of input_ids, got ",
           batch.decoder_input_ids.defined() ? batch.decoder_input_ids.str() : std::string("none"));
  const GlobalTensor enc =
      global::dropout(shared_->forward(ids), training() ? c_.embedding_dropout_prob : 0.0);  // (B, T_enc, C)
  const GlobalTensor dec = shared_->forward(host_beside(ids, host_i64(batch.decoder_input_ids)));  // (B, T_dec, C)
  return layers::round_to(global::cat({enc, dec}, 1), c_.settings.dtype);  // its dropout: decoder block 0's
}

GlobalTensor T5Model::position_bias(bool decoder, int64_t tq, int64_t tk, const GlobalTensor& like) const {
  const layers::Embedding& table = decoder ? *dec_table_ : *enc_table_;
  const Tensor buckets = t5_relative_buckets(tq, tk, !decoder, c_.relative_attention_num_buckets,
                                             c_.relative_attention_max_distance);
  const GlobalTensor b = table.forward(host_beside(like, buckets));  // (Tq, Tk, H)
  return global::permute(b, {2, 0, 1});  // (H, Tq, Tk)
}

GlobalTensor T5Model::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  const int64_t Le = c_.num_layers, B = x.logical_shape[0], T = x.logical_shape[1];
  MF_CHECK(batch.decoder_input_ids.defined() && batch.decoder_input_ids.ndim() == 2, "t5: the batch has no decoder_input_ids");
  const int64_t Td = batch.decoder_input_ids.shape(1), Te = T - Td;
  MF_CHECK(Te > 0, "t5: an activation of ", T, " positions cannot hold ", Td, " decoder positions");
  const T5Block& block = *blocks_.at(static_cast<size_t>(layer));
  GlobalTensor enc = global::narrow(x, 1, 0, Te), dec = global::narrow(x, 1, Te, Td);
  if (layer < Le) {
    enc = block.forward(enc, position_bias(false, Te, Te, enc), hidden_keys(batch.attention_mask, B, 1, Te, false),
                        GlobalTensor{}, Tensor(), recompute_inside);
  } else {
    if (layer == Le) {  // the encoder's output, and the decoder's input dropout
      const double p = training() ? c_.embedding_dropout_prob : 0.0;
      enc = global::dropout(enc_final_norm_->forward(enc), p);
      dec = global::dropout(dec, p);
    }
    dec = block.forward(dec, position_bias(true, Td, Td, dec),
                        hidden_keys(batch.decoder_attention_mask, B, Td, Td, true), enc,
                        hidden_keys(batch.attention_mask, B, 1, Te, false), recompute_inside);
  }
  return global::cat({enc, dec}, 1);
}

std::optional<CheckpointGranularity> T5Model::recomputation(int64_t layer) const {
  if (!c_.settings.recomputes(layer, c_.total_layers())) return std::nullopt;
  return c_.settings.granularity;
}

GlobalTensor T5Model::decoder_output(const GlobalTensor& hidden, int64_t t_dec) const {
  const int64_t T = hidden.logical_shape[1];
  MF_CHECK(t_dec > 0 && t_dec < T, "t5: ", t_dec, " decoder positions of an activation of ", T);
  GlobalTensor y = global::dropout(dec_final_norm_->forward(global::narrow(hidden, 1, T - t_dec, t_dec)),
                                   training() ? c_.embedding_dropout_prob : 0.0);
  if (c_.tie_word_embeddings)  // the tied projection sees the output scaled by d_model^-1/2
    y = layers::round_to(global::scale(global::context_of(y.placement), y, 1.0 / std::sqrt(static_cast<double>(c_.hidden_size))),
                         c_.settings.dtype);
  return y;
}

GlobalTensor T5Model::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  const int64_t B = hidden.logical_shape[0];
  MF_CHECK(batch.labels.defined() && batch.labels.ndim() == 2 && batch.labels.shape(0) == B, "t5: labels must be (batch, ",
           "decoder seq), got ", batch.labels.defined() ? batch.labels.str() : std::string("none"));
  const GlobalTensor y = decoder_output(hidden, batch.labels.shape(1));
  layers::LmLossOptions o;
  o.chunk_elements = c_.head_chunk_elements;
  o.recompute = c_.settings.recompute && c_.settings.granularity == CheckpointGranularity::kFull && training();
  o.storage = c_.settings.dtype;
  return step_share(layers::lm_loss(y, batch.labels, output_table(), o), static_cast<double>(counted_labels(batch.labels)),
                    totals.at(0));
}

Tensor T5Model::logits(const Batch& batch) const {
  MF_CHECK(batch.decoder_input_ids.defined(), "t5: logits need decoder_input_ids");
  const int64_t td = batch.decoder_input_ids.shape(1);
  return run_whole(batch, [this, td](const GlobalTensor& h) {  // -> (B, T_dec, V)
    return output_table().project(decoder_output(h, td));
  });
}

Tensor T5Model::encoder_hidden_states(const Batch& batch) const {
  MF_CHECK(batch.decoder_input_ids.defined(), "t5: the encoder's states need decoder_input_ids (the decoder runs too)");
  const int64_t te = batch.input_ids.shape(1);
  return run_whole(batch, [te](const GlobalTensor& h) { return global::narrow(h, 1, 0, te); });
}

}  // namespace mf::models
