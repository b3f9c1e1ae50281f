#include "meshflow/models/t5/spec.h"

#include <limits>

#include "meshflow/models/t5/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::t5 {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
T5Config sizes(const Config& c) { return t5_config(c, 0); }

ModelSpec spec(bool mt5) {
  ModelSpec s = family_spec<T5Model>(mt5 ? "mt5" : "t5", &t5_config, t5_schema());
  // What the tensors' shapes do not show, beyond the schema's: the MLP's kind.
  s.structure_keys.emplace_back("model.feed_forward_proj");
  s.num_layers = [](const Config& c) {  // the encoder's and the decoder's blocks (0 decoder layers: as many)
    const int64_t enc = c.get_int("model.num_layers"), dec = c.get_int("model.num_decoder_layers");
    const int64_t d = dec == 0 ? enc : dec;
    MF_CHECK(enc <= std::numeric_limits<int64_t>::max() - d, "t5: model.num_layers ", enc, " and ",
             dec == 0 ? "as many decoder layers" : detail::cat("model.num_decoder_layers ", dec),
             " are more layers than int64 counts");
    return enc + d;
  };
  s.layer_activations = [](const Config& c, int64_t layer, int64_t seq_len) {
    // Per encoder token (the planner's sequence). An encoder block keeps its post-attention
    // residual with the RMSNorms' statistics (sequence), its input and the norm outputs
    // (gathered), q, k, v, the attention output, the MLP's hidden states — ReLU: wi's output and
    // its activation; gated GELU: both projections, the GELU and their product (split) — and
    // its eager attention's probabilities per key (softmax's output, and the dropout's when the
    // attention has dropout: the attention core's own). A decoder block keeps the same at the
    // decoder's length (decoder_seq_length per encoder position) and its cross-attention's
    // residual, norm output, q, output and probabilities there, and k, v of the encoder's output
    // at the encoder's length.
    const T5Config t = sizes(c);
    const double C = static_cast<double>(t.hidden_size), I = static_cast<double>(t.inner_dim());
    const double F = static_cast<double>(t.ffn_hidden_size) * (t.gated_gelu ? 4 : 2);
    const double heads = static_cast<double>(t.num_attention_heads), te = static_cast<double>(seq_len);
    const double td = static_cast<double>(t.decoder_seq_length), r = td / te;
    const double per_score = t.attention_dropout_prob > 0 ? 2 : 1;
    // The backward's peak beyond the probabilities kept: two score gradients, less the dropout's
    // output (released once its matmul's backward has run).
    auto work = [per_score](double kept_scores) { return (3 - per_score) * kept_scores / per_score; };
    // The relative position bias (f32: the table as computed) and its i64 bucket ids, per stack.
    // Full recomputation keeps a block's input: the whole stream, encoder and decoder.
    auto with_bias = [&](LayerActivations a, double t) {
      a.bias_bytes = 4 * heads * t * t;
      a.bias_ids_bytes = 8 * t * t;
      a.whole_input = (1 + r) * C;
      return a;
    };
    // A block's input is its part of the encoder-and-decoder stream (T5Model::run_layer), whole
    // on every rank that runs the block (taking the part gathers a split sequence).
    if (layer < t.num_layers) {
      const double scores = per_score * heads * te;
      return with_bias({C + 2, 3 * C, 4 * I + F + scores, scores, work(scores)}, te);
    }
    // The decoder's self-attention over td keys and its cross-attention over te, per decoder
    // token, r decoder tokens per encoder token.
    const double scores = per_score * heads * (td + te) * r;
    // The stream between decoder blocks is the encoder's output and the decoder's hidden state
    // side by side: a block's input is held whole (its encoder part is the cross-attention's k and
    // v input), then its residuals and statistics at the decoder's length.
    return with_bias({(2 * C + 3) * r, (1 + r) * C + 3 * C * r, (6 * I + F) * r + 2 * I + scores, scores, work(scores)},
                     td);
  };
  // The loss head projects the decoder's positions: decoder_seq_length per encoder sequence.
  s.head_token_share = [](const Config& c, int64_t seq_len) {
    return static_cast<double>(sizes(c).decoder_seq_length) / static_cast<double>(seq_len);
  };
  s.checkpoint_config = checkpoint_config_from_run<T5Config>(
      "T5", "the head count and the bucket sizes do", &sizes,
      [](const T5Config&) { return std::string("shared.weight"); });
  s.hf = hf(mt5);
  return s;
}

}  // namespace

ModelSpec t5_spec() { return spec(false); }
ModelSpec mt5_spec() { return spec(true); }

}  // namespace mf::models::t5
