#include "meshflow/models/t5/model.h"

#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"
#include "meshflow/layers/position_bias.h"

namespace mf::models {

namespace {

// T5's attention under `path` ("layer.0.SelfAttention"): q, k, v, o without biases, no scaling,
// computed as Hugging Face's eager attention.
layers::AttentionSpec t5_attention_spec(const T5Config& c, const std::string& path, bool causal) {
  return {.hidden = c.hidden_size, .heads = c.num_attention_heads, .head_dim = c.head_dim, .qkv_bias = false,
          .out_bias = false, .causal = causal, .dropout_p = c.attention_dropout_prob, .scale = 1.0, .eager = true,
          .q = path + ".q", .k = path + ".k", .v = path + ".v", .out = path + ".o"};
}

}  // namespace

layers::BlockSpec t5_block_spec(const T5Config& c, bool decoder) {
  using layers::BlockPart;
  const std::string mlp = decoder ? "layer.2." : "layer.1.";  // the MLP's sublayer
  layers::BlockSpec s{.attention = t5_attention_spec(c, "layer.0.SelfAttention", decoder),
                      // gelu_new: the tanh form
                      .mlp = {.hidden = c.hidden_size, .ffn = c.ffn_hidden_size,
                              .act = c.gated_gelu ? layers::Activation::kGeluTanh : layers::Activation::kRelu,
                              .gated = c.gated_gelu, .bias = false, .dropout_p = c.output_dropout_prob,
                              .gate = mlp + "DenseReluDense.wi_0",
                              .up = mlp + (c.gated_gelu ? "DenseReluDense.wi_1" : "DenseReluDense.wi"),
                              .down = mlp + "DenseReluDense.wo"},
                      .norm = layers::NormKind::kRMSNorm, .norm_eps = c.layernorm_epsilon,
                      .dropout_p = c.output_dropout_prob, .norm1 = "layer.0.layer_norm",
                      .norm2 = mlp + "layer_norm",
                      .order = {BlockPart::kAttention, BlockPart::kNorm1, BlockPart::kMlp, BlockPart::kNorm2}};
  if (decoder) {
    s.cross_attention = t5_attention_spec(c, "layer.1.EncDecAttention", false);
    s.norm_cross = "layer.1.layer_norm";
    s.order.insert(s.order.begin() + 2, {BlockPart::kCrossAttention, BlockPart::kCrossNorm});
  }
  return s;
}

// ---- the model

T5Model::T5Model(const T5Config& c, const ModelContext& ctx) : ConfiguredModel(c, ctx, c.total_layers()) {
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
    const layers::BlockSpec spec = t5_block_spec(c, decoder);
    for (int64_t j = 0; j < n; ++j)
      blocks_.push_back(
          group->add(std::to_string(j), std::make_shared<layers::TransformerBlock>(spec, layer_placement(first + j), dt)));
    // This stack's bias table, block 0's (after its self-attention's projections), used by every
    // block of the stack.
    auto t = std::make_shared<layers::Embedding>(c.relative_attention_num_buckets, c.num_attention_heads,
                                                 layers_placement(first, first + n), false, dt);
    layers::add_at(*blocks_[static_cast<size_t>(first)], "layer.0.SelfAttention.relative_attention_bias", t);
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
  const double f = c_.initializer_factor, C = static_cast<double>(c_.hidden_size);
  init_normal(
      seed, [](const std::string& name, const Shape&) { return name.ends_with("layer_norm.weight"); },
      [&](const std::string& name, const Shape&) {
        if (name == "shared.weight" || name == "lm_head.weight") return f;
        if (name.ends_with(".q.weight")) return f / std::sqrt(C * static_cast<double>(c_.head_dim));
        if (name.ends_with(".o.weight")) return f / std::sqrt(static_cast<double>(c_.inner_dim()));
        if (name.ends_with(".wo.weight")) return f / std::sqrt(static_cast<double>(c_.ffn_hidden_size));
        return f / std::sqrt(C);  // k, v, wi, wi_0, wi_1, the bias tables
      });
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
    (name.starts_with("encoder.") ? enc : dec) += n;
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
  const GlobalTensor enc = layers::dropout(shared_->forward(ids), training() ? c_.embedding_dropout_prob : 0.0,
                                           c_.settings.dtype);                              // (B, T_enc, C)
  const GlobalTensor dec = shared_->forward(global::broadcast_beside(ids, host_i64(batch.decoder_input_ids)));  // (B, T_dec, C)
  return global::cat({enc, dec}, 1);  // the decoder's dropout: decoder block 0's
}

GlobalTensor T5Model::position_bias(bool decoder, int64_t tq, int64_t tk, const GlobalTensor& like) const {
  return layers::relative_position_bias(decoder ? *dec_table_ : *enc_table_, tq, tk, !decoder,
                                       c_.relative_attention_max_distance, like);
}

GlobalTensor T5Model::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  const int64_t Le = c_.num_layers, T = x.logical_shape[1];
  MF_CHECK(batch.decoder_input_ids.defined() && batch.decoder_input_ids.ndim() == 2, "t5: the batch has no decoder_input_ids");
  const int64_t Td = batch.decoder_input_ids.shape(1), Te = T - Td;
  MF_CHECK(Te > 0, "t5: an activation of ", T, " positions cannot hold ", Td, " decoder positions");
  const layers::TransformerBlock& block = *blocks_.at(static_cast<size_t>(layer));
  GlobalTensor enc = global::narrow(x, 1, 0, Te), dec = global::narrow(x, 1, Te, Td);
  layers::BlockInputs in;
  if (layer < Le) {
    in.self.key_padding = key_padding_mask(batch.attention_mask);
    in.self.bias = position_bias(false, Te, Te, enc);
    enc = block.forward(enc, recompute_inside, in);
  } else {
    if (layer == Le) {  // the encoder's output, and the decoder's input dropout
      const double p = training() ? c_.embedding_dropout_prob : 0.0;
      enc = layers::dropout(enc_final_norm_->forward(enc), p, c_.settings.dtype);
      dec = layers::dropout(dec, p, c_.settings.dtype);
    }
    in.self.key_padding = key_padding_mask(batch.decoder_attention_mask);
    in.self.bias = position_bias(true, Td, Td, dec);
    in.memory = enc;
    in.cross.key_padding = key_padding_mask(batch.attention_mask);
    dec = block.forward(dec, recompute_inside, in);
  }
  return global::cat({enc, dec}, 1);
}

GlobalTensor T5Model::decoder_output(const GlobalTensor& hidden, int64_t t_dec) const {
  const int64_t T = hidden.logical_shape[1];
  MF_CHECK(t_dec > 0 && t_dec < T, "t5: ", t_dec, " decoder positions of an activation of ", T);
  const GlobalTensor y = layers::dropout(dec_final_norm_->forward(global::narrow(hidden, 1, T - t_dec, t_dec)),
                                         training() ? c_.embedding_dropout_prob : 0.0, c_.settings.dtype);
  if (!c_.tie_word_embeddings) return y;
  // The tied projection sees the output scaled by d_model^-1/2.
  return layers::scale(y, 1.0 / std::sqrt(static_cast<double>(c_.hidden_size)), c_.settings.dtype);
}

GlobalTensor T5Model::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  const int64_t B = hidden.logical_shape[0];
  MF_CHECK(batch.labels.defined() && batch.labels.ndim() == 2 && batch.labels.shape(0) == B, "t5: labels must be (batch, ",
           "decoder seq), got ", batch.labels.defined() ? batch.labels.str() : std::string("none"));
  const GlobalTensor y = decoder_output(hidden, batch.labels.shape(1));
  const GlobalTensor mean =
      layers::lm_loss(y, batch.labels, output_table(), c_.settings.loss_options(c_.head_chunk_elements, training()));
  return step_share(mean, static_cast<double>(counted_labels(batch.labels)), totals.at(0));
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
