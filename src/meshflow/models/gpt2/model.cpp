#include "meshflow/models/gpt2/model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/nn/init.h"
#include "meshflow/parallel/lm_head.h"
#include "meshflow/random/batch_slice.h"

namespace mf::models {

Gpt2Block::Gpt2Block(const Gpt2Config& c, const nn::TensorParallel& tp) : c_(c), tp_(tp) {
  int64_t C = c.hidden_size;
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(C, c.layernorm_epsilon, c.dtype));
  auto attn = register_module("attn", std::make_shared<nn::ModuleGroup>());
  const int64_t D = C / c.num_attention_heads;  // q|k|v split by whole heads
  c_attn_ = attn->add("c_attn", std::make_shared<parallel::ColumnConv1D>(C, 3 * C, tp, 3, c.dtype,
                                                                         parallel::SplitUnits{D, "model.num_attention_heads"}));
  attn_proj_ = attn->add("c_proj", std::make_shared<parallel::RowConv1D>(C, C, tp, c.dtype));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(C, c.layernorm_epsilon, c.dtype));
  auto mlp = register_module("mlp", std::make_shared<nn::ModuleGroup>());
  c_fc_ = mlp->add("c_fc", std::make_shared<parallel::ColumnConv1D>(C, c.ffn(), tp, 1, c.dtype,
                                                                    parallel::SplitUnits{1, "model.ffn_hidden_size"}));
  mlp_proj_ = mlp->add("c_proj", std::make_shared<parallel::RowConv1D>(c.ffn(), C, tp, c.dtype));
}


Tensor Gpt2Block::forward(const Tensor& x, int64_t seq_len, bool recompute_attention) const {
  // x (B, T, C); sequence parallel: (B, T / tp, C), this rank's positions of seq_len.
  // Under tensor parallelism this rank computes heads [h0, h0 + H) of the logical num_attention_heads.
  const int64_t T = parallel::logical_sequence_length(x, seq_len, tp_);
  const int64_t B = x.shape(0), C = c_.hidden_size, D = C / c_.num_attention_heads;
  const int64_t H = c_attn_->local_out() / (3 * D), h0 = c_attn_->local_group_start() / D;
  double p_out = training() ? c_.output_dropout_prob : 0.0;
  Tensor qkv = c_attn_->forward(ln_1_->forward(x), T);  // (B, T, 3 H D) = (B, T, 3, H, D)
  AttentionOptions opts;
  opts.causal = true;
  opts.dropout_p = training() ? c_.attention_dropout_prob : 0.0;
  opts.logical_heads = c_.num_attention_heads;
  opts.head_offset = h0;
  // The attention core: qkv (B, T, 3 H D) -> (B, H, T, D). Its dropout takes the next stream of
  // the default generator and reads the batch slice, both of which checkpoint() replays.
  auto core = [B, T, H, D, opts](const std::vector<Tensor>& in) {
    Tensor qkv5 = view(in[0], {B, T, 3, H, D});
    auto head_view = [&](int64_t i) { return permute(squeeze(narrow(qkv5, 2, i, 1), 2), {0, 2, 1, 3}); };  // (B,H,T,D)
    return std::vector<Tensor>{scaled_dot_product_attention(head_view(0), head_view(1), head_view(2), opts)};
  };
  Tensor y = recompute_attention && qkv.requires_grad() ? checkpoint(core, {qkv})[0] : core({qkv})[0];  // (B, H, T, D)
  // Mixed precision: the attention output, the MLP activation and the residual stream are
  // rounded to the parameter dtype (identity for f32/f64), or, on a device with native half
  // kernels, already are in it (nn/mixed_precision.h).
  const DType st = c_.dtype;
  y = nn::round_to(reshape(transpose(y, 1, 2), {B, T, H * D}), st);  // a view: the output is stored (B, T, H, D)
  Tensor h = nn::round_to(add(x, parallel::sequence_dropout(attn_proj_->forward(y, T), p_out, T, tp_)), st);
  Tensor m = mlp_proj_->forward(nn::round_to(gelu(c_fc_->forward(ln_2_->forward(h), T), true), st), T);
  return nn::round_to(add(h, parallel::sequence_dropout(m, p_out, T, tp_)), st);
}

namespace {
PipelineStage resolved(PipelineStage s, int64_t num_layers) {
  if (s.end_layer < 0) s.end_layer = num_layers;
  return s;
}
}  // namespace

Gpt2Model::Gpt2Model(const Gpt2Config& c, const nn::TensorParallel& tp, const PipelineStage& stage)
    : Model(ModelContext{tp, resolved(stage, c.num_layers)}), c_(c), tp_(tp) {
  const PipelineStage& st = this->stage();
  chunk_layers_ = st.chunk_layers(c.num_layers);
  c.validate();
  auto tr = register_module("transformer", std::make_shared<nn::ModuleGroup>());
  transformer_ = tr;
  if (st.first || st.last)
    wte_ = tr->add("wte", std::make_shared<parallel::VocabParallelEmbedding>(c.vocab_size, c.hidden_size, tp, c.dtype));
  if (st.first) wpe_ = tr->add("wpe", std::make_shared<nn::Embedding>(c.max_seq_length, c.hidden_size, c.dtype));
  auto h = tr->add("h", std::make_shared<nn::ModuleGroup>());
  for (const auto& [a, b] : chunk_layers_)
    for (int64_t i = a; i < b; ++i) blocks_.push_back(h->add(std::to_string(i), std::make_shared<Gpt2Block>(c, tp)));
  if (st.last) ln_f_ = tr->add("ln_f", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layernorm_epsilon, c.dtype));
  // lm_head.weight is tied to transformer.wte.weight (not a separate parameter).
}

Tensor Gpt2Model::embedding_weight() const { return wte_ ? wte_->weight : Tensor(); }

void Gpt2Model::init_weights(uint64_t seed) {
  NoGradGuard ng;
  const double std_out = c_.initializer_range / std::sqrt(2.0 * static_cast<double>(c_.num_layers));
  MF_CHECK(!blocks_.empty(), "gpt2: a model or pipeline stage without layers");
  // Parameter k of the whole model's order draws from a generator of its own, whatever stage
  // holds it.
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  for (const nn::ParamPiece& p : nn::param_pieces(*this, tp_)) {
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

Tensor Gpt2Model::stage_forward(const Tensor& input, uint64_t stream0, int64_t T, int64_t chunk) const {
  const PipelineStage& st = stage();
  MF_CHECK(chunk >= 0 && chunk < st.num_chunks(), "gpt2: chunk ", chunk, " of a stage with ", st.num_chunks());
  const bool embed = st.first && chunk == 0, head = st.last && chunk + 1 == st.num_chunks();
  Generator& gen = default_generator();
  // Evaluation draws nothing and leaves the generator alone.
  auto use_stream = [&](uint64_t k) {
    if (training()) gen.set_state({gen.seed(), stream0 + k});
  };
  MF_CHECK(T > 0 && T <= c_.max_seq_length, "gpt2: sequence length ", T, " must be in [1, model.max_seq_length = ",
           c_.max_seq_length, "]");
  Tensor x;
  if (embed) {
    const Tensor& ids = input;
    MF_CHECK(ids.ndim() == 2 && ids.shape(1) == T, "gpt2: input ids must be (batch, ", T, "), got ", ids.str());
    Tensor pos = to(arange(T, DType::kI64), ids.device());
    enter(0);
    x = nn::round_to(add(wte_->forward(ids), wpe_->forward(pos)), c_.dtype);  // (B, T, C) + (T, C)
    use_stream(0);
    x = leave(0, dropout(x, training() ? c_.embedding_dropout_prob : 0.0));
    // Sequence parallel: between the blocks each rank keeps its part of the sequence (a local
    // slice; ln_f's output is gathered back for the vocabulary-parallel head).
    x = parallel::scatter_to_sequence_parallel(x, tp_);
  } else {
    x = input;
  }
  int64_t offset = 0;  // index in blocks_ of this chunk's first block
  for (int64_t k = 0; k < chunk; ++k) offset += chunk_layers_[static_cast<size_t>(k)].second - chunk_layers_[static_cast<size_t>(k)].first;
  const auto [layer0, layer_end] = chunk_layers_[static_cast<size_t>(chunk)];
  for (int64_t layer = layer0; layer < layer_end; ++layer) {
    use_stream(1 + kStreamsPerBlock * static_cast<uint64_t>(layer));
    const auto& blk = blocks_[static_cast<size_t>(offset + layer - layer0)];
    enter(1 + layer);
    const bool recompute = c_.checkpointed(layer) && training() && grad_enabled();
    if (recompute && c_.checkpoint_granularity == CheckpointGranularity::kFull) {
      auto b = blk;
      x = checkpoint([b, T](const std::vector<Tensor>& in) { return std::vector<Tensor>{b->forward(in[0], T)}; }, {x})[0];
    } else {
      x = blk->forward(x, T, recompute);
    }
    x = leave(1 + layer, x);
  }
  use_stream(streams_per_forward());
  if (!head) return x;
  enter(head_unit());  // left in head_loss() / logits(), after the tied head
  x = ln_f_->forward(x);
  x = parallel::gather_from_sequence_parallel(x, T, tp_);
  return x;
}

Tensor Gpt2Model::logits(const Tensor& ids) const {
  MF_CHECK(stage().whole(), "gpt2: the whole-model forward needs every layer (this is a pipeline stage)");
  MF_CHECK(ids.ndim() == 2, "gpt2: input ids must be (batch, seq), got ", ids.str());
  const Tensor h = stage_forward(ids, default_generator().state().next_stream, ids.shape(1));
  return leave(head_unit(), nn::round_to(linear(h, nn::compute(wte_->weight)), c_.dtype));
}

Shape Gpt2Model::activation_shape(int64_t rows, int64_t seq_len) const {
  return {rows, parallel::sequence_piece_length(seq_len, tp_), c_.hidden_size};
}

std::string Gpt2Model::describe() const { return gpt2_describe(c_); }

Tensor Gpt2Model::head_loss(const Tensor& hidden, const Tensor& labels) const {
  MF_CHECK(stage().last, "gpt2: the loss is computed on the last pipeline stage");
  MF_CHECK(hidden.ndim() == 3 && labels.shape() == Shape({hidden.shape(0), hidden.shape(1)}), "gpt2: labels ",
           labels.str(), " must be (batch, seq) of the hidden state ", hidden.str());
  // The tied embedding is the output projection. Full checkpointing recomputes each chunk's
  // logits in backward: the (N, V) logits and their gradient, the largest activation of a GPT-2
  // step, are never held whole.
  parallel::LmLossOptions o;
  o.chunk_elements = c_.head_chunk_elements;
  o.recompute = c_.activation_checkpointing && c_.checkpoint_granularity == CheckpointGranularity::kFull && training();
  o.storage = c_.dtype;
  return leave(head_unit(), parallel::lm_head_loss(hidden, labels, wte_, o));
}

std::vector<nn::ParamUnit> Gpt2Model::parameter_units() const {
  return layered_units({"transformer.wte.", "transformer.wpe."}, "transformer.h.", {"transformer.ln_f.", "transformer.wte."},
                       chunk_layers_, c_.num_layers);
}

double Gpt2Model::flops_per_token(int64_t seq_len) const {
  // The whole model's count (a stage's share is not meaningful for MFU).
  const int64_t block = c_.hidden_size * 3 * c_.hidden_size + 3 * c_.hidden_size + c_.hidden_size * c_.hidden_size +
                        c_.hidden_size + 2 * c_.hidden_size * c_.ffn() + c_.ffn() + c_.hidden_size + 4 * c_.hidden_size;
  const int64_t whole = c_.vocab_size * c_.hidden_size + c_.num_layers * block + 2 * c_.hidden_size;
  double params = static_cast<double>(whole);  // wpe is a lookup, not counted
  return 6.0 * params + 12.0 * static_cast<double>(c_.num_layers * c_.hidden_size * seq_len);
}

}  // namespace mf::models
