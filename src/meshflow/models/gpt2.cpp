#include "meshflow/models/gpt2.h"

#include <algorithm>
#include <cmath>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/dist/boxing.h"
#include "meshflow/dist/sbp.h"
#include "meshflow/dist/vocab_parallel.h"
#include "meshflow/random/batch_slice.h"

namespace mf::models {

CheckpointGranularity parse_checkpoint_granularity(const std::string& name) {
  if (name == "full") return CheckpointGranularity::kFull;
  if (name == "selective") return CheckpointGranularity::kSelective;
  MF_THROW("train.activation_checkpoint.granularity '", name, "' is not one of full, selective");
}

bool Gpt2Config::checkpointed(int64_t layer) const {
  const int64_t end = checkpoint_end_layer < 0 ? num_layers : checkpoint_end_layer;
  return activation_checkpointing && layer >= checkpoint_start_layer && layer < end;
}

void Gpt2Config::validate() const {
  MF_CHECK(vocab_size > 0 && max_seq_length > 0 && hidden_size > 0 && num_layers > 0 && num_attention_heads > 0,
           "gpt2: model sizes must be positive (vocab_size ", vocab_size, ", max_seq_length ", max_seq_length,
           ", hidden_size ", hidden_size, ", num_layers ", num_layers, ", num_attention_heads ", num_attention_heads, ")");
  MF_CHECK(hidden_size % num_attention_heads == 0, "gpt2: model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads);
  for (double p : {embedding_dropout_prob, attention_dropout_prob, output_dropout_prob})
    MF_CHECK(p >= 0.0 && p < 1.0, "gpt2: dropout probabilities must be in [0, 1), got ", p);
  MF_CHECK(checkpoint_start_layer >= 0 && checkpoint_start_layer < num_layers,
           "gpt2: train.activation_checkpoint.start_layer ", checkpoint_start_layer, " must be in [0, model.num_layers = ",
           num_layers, ")");
  MF_CHECK(checkpoint_end_layer == -1 || (checkpoint_end_layer > checkpoint_start_layer && checkpoint_end_layer <= num_layers),
           "gpt2: train.activation_checkpoint.end_layer ", checkpoint_end_layer, " must be -1 (model.num_layers) or in (",
           "start_layer = ", checkpoint_start_layer, ", model.num_layers = ", num_layers, "]");
  MF_CHECK(head_chunk_elements > 0, "gpt2: head_chunk_elements ", head_chunk_elements, " must be positive");
  MF_CHECK(is_floating(dtype), "gpt2: the parameter dtype must be f32, f64, bf16 or f16, got ", dtype_name(dtype));
}

std::vector<std::pair<std::string, Shape>> gpt2_parameter_shapes(const Gpt2Config& c) {
  const int64_t C = c.hidden_size, F = c.ffn();
  std::vector<std::pair<std::string, Shape>> out = {{"transformer.wte.weight", {c.vocab_size, C}},
                                                     {"transformer.wpe.weight", {c.max_seq_length, C}}};
  const std::pair<const char*, Shape> block[] = {
      {"ln_1.weight", {C}},         {"ln_1.bias", {C}},         {"attn.c_attn.weight", {C, 3 * C}},
      {"attn.c_attn.bias", {3 * C}}, {"attn.c_proj.weight", {C, C}}, {"attn.c_proj.bias", {C}},
      {"ln_2.weight", {C}},         {"ln_2.bias", {C}},         {"mlp.c_fc.weight", {C, F}},
      {"mlp.c_fc.bias", {F}},       {"mlp.c_proj.weight", {F, C}}, {"mlp.c_proj.bias", {C}}};
  for (int64_t l = 0; l < c.num_layers; ++l)
    for (const auto& [name, shape] : block) out.emplace_back("transformer.h." + std::to_string(l) + "." + name, shape);
  out.emplace_back("transformer.ln_f.weight", Shape{C});
  out.emplace_back("transformer.ln_f.bias", Shape{C});
  return out;
}

Gpt2Block::Gpt2Block(const Gpt2Config& c, const nn::TensorParallel& tp) : c_(c), tp_(tp) {
  int64_t C = c.hidden_size;
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(C, c.layernorm_epsilon, c.dtype));
  auto attn = register_module("attn", std::make_shared<nn::ModuleGroup>());
  c_attn_ = attn->add("c_attn", std::make_shared<nn::ColumnConv1D>(C, 3 * C, tp, 3, c.dtype));  // by heads
  attn_proj_ = attn->add("c_proj", std::make_shared<nn::RowConv1D>(C, C, tp, c.dtype));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(C, c.layernorm_epsilon, c.dtype));
  auto mlp = register_module("mlp", std::make_shared<nn::ModuleGroup>());
  c_fc_ = mlp->add("c_fc", std::make_shared<nn::ColumnConv1D>(C, c.ffn(), tp, 1, c.dtype));
  mlp_proj_ = mlp->add("c_proj", std::make_shared<nn::RowConv1D>(c.ffn(), C, tp, c.dtype));
}

namespace {
bool sequence_parallel(const nn::TensorParallel& tp) { return tp.enabled() && tp.sequence_parallel; }

// Dropout of a sequence-parallel piece (B, T / tp, C) of a (B, T, C) activation: it draws the
// numbers of its logical positions (and of the data-parallel batch slice, if any).
Tensor seq_dropout(const Tensor& x, double p, int64_t seq_len, const nn::TensorParallel& tp) {
  if (!sequence_parallel(tp) || p == 0.0) return dropout(x, p);
  LogicalSlice s = batch_logical_slice(x.shape(), "dropout");
  if (s.whole()) {
    s.logical_shape = x.shape();
    s.start.assign(x.shape().size(), 0);
  }
  s.logical_shape[1] = seq_len;
  s.start[1] = dist::split_start(seq_len, tp.size(), tp.rank());
  return dropout(x, p, true, nullptr, s);
}
}  // namespace

Tensor Gpt2Block::forward(const Tensor& x, int64_t seq_len, bool recompute_attention) const {
  // x (B, T, C); sequence parallel: (B, T / tp, C), this rank's positions of seq_len.
  // Under tensor parallelism this rank computes heads [h0, h0 + H) of the logical num_attention_heads.
  const int64_t T = sequence_parallel(tp_) ? seq_len : x.shape(1);
  const int64_t B = x.shape(0), C = c_.hidden_size, D = C / c_.num_attention_heads;
  const int64_t H = c_.num_attention_heads / tp_.size(), h0 = tp_.rank() * H;
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
  Tensor h = nn::round_to(add(x, seq_dropout(attn_proj_->forward(y, T), p_out, T, tp_)), st);
  Tensor m = mlp_proj_->forward(nn::round_to(gelu(c_fc_->forward(ln_2_->forward(h), T), true), st), T);
  return nn::round_to(add(h, seq_dropout(m, p_out, T, tp_)), st);
}

Gpt2Model::Gpt2Model(const Gpt2Config& c, const nn::TensorParallel& tp, const Gpt2Stage& stage)
    : c_(c), tp_(tp), stage_(stage) {
  if (stage_.end_layer < 0) stage_.end_layer = c.num_layers;
  chunk_layers_.emplace_back(stage_.first_layer, stage_.end_layer);
  for (const auto& r : stage_.later_chunks) chunk_layers_.push_back(r);
  for (size_t k = 0; k < chunk_layers_.size(); ++k) {
    const auto [a, b] = chunk_layers_[k];
    MF_CHECK(a >= 0 && a <= b && b <= c.num_layers && (k == 0 || a >= chunk_layers_[k - 1].second),
             "gpt2: pipeline stage chunk ", k, " layers [", a, ", ", b, ") outside [0, ", c.num_layers,
             ") or not after the previous chunk");
  }
  c.validate();
  MF_CHECK(c.num_attention_heads % tp.size() == 0 && c.ffn() % tp.size() == 0, "gpt2: train.dist.tensor_parallel_size ",
           tp.size(), " must divide model.num_attention_heads (", c.num_attention_heads, ") and model.ffn_hidden_size (",
           c.ffn(), ")");
  auto tr = register_module("transformer", std::make_shared<nn::ModuleGroup>());
  transformer_ = tr;
  if (stage_.first || stage_.last)
    wte_ = tr->add("wte", std::make_shared<nn::VocabParallelEmbedding>(c.vocab_size, c.hidden_size, tp, c.dtype));
  if (stage_.first) wpe_ = tr->add("wpe", std::make_shared<nn::Embedding>(c.max_seq_length, c.hidden_size, c.dtype));
  auto h = tr->add("h", std::make_shared<nn::ModuleGroup>());
  for (const auto& [a, b] : chunk_layers_)
    for (int64_t i = a; i < b; ++i) blocks_.push_back(h->add(std::to_string(i), std::make_shared<Gpt2Block>(c, tp)));
  if (stage_.last) ln_f_ = tr->add("ln_f", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layernorm_epsilon, c.dtype));
  // lm_head.weight is tied to transformer.wte.weight (not a separate parameter).
}

Tensor Gpt2Model::embedding_weight() const { return wte_ ? wte_->weight : Tensor(); }

namespace {
// The index of a parameter in the whole model's order (wte, wpe, h.0.*, ..., ln_f.*): its
// initialisation stream, the same whatever stage holds it.
uint64_t whole_model_index(const std::string& name, int64_t num_layers, const std::vector<std::string>& block_names) {
  const uint64_t per_block = block_names.size();
  if (name == "transformer.wte.weight") return 0;
  if (name == "transformer.wpe.weight") return 1;
  const std::string h = "transformer.h.";
  if (name.compare(0, h.size(), h) == 0) {
    const size_t dot = name.find('.', h.size());
    const uint64_t layer = std::stoull(name.substr(h.size(), dot - h.size()));
    const std::string rest = name.substr(dot + 1);
    for (size_t k = 0; k < block_names.size(); ++k)
      if (block_names[k] == rest) return 2 + layer * per_block + k;
  }
  if (name == "transformer.ln_f.weight") return 2 + static_cast<uint64_t>(num_layers) * per_block;
  if (name == "transformer.ln_f.bias") return 3 + static_cast<uint64_t>(num_layers) * per_block;
  MF_THROW("gpt2: unknown parameter '", name, "'");
}
}  // namespace

void Gpt2Model::init_weights(uint64_t seed) {
  NoGradGuard ng;
  const double std_out = c_.initializer_range / std::sqrt(2.0 * static_cast<double>(c_.num_layers));
  MF_CHECK(!blocks_.empty(), "gpt2: a model or pipeline stage without layers");
  std::vector<std::string> block_names;
  for (auto& [n, t] : blocks_.front()->named_parameters()) block_names.push_back(n);
  const std::vector<nn::ParamLayout> layouts = parameter_layouts();
  size_t index = 0;
  for (auto& [name, local] : named_parameters()) {
    const uint64_t stream = whole_model_index(name, c_.num_layers, block_names);
    // A split parameter draws its logical positions' numbers (tp-independent values).
    const nn::ParamLayout& layout = layouts[index++];
    Tensor p = view(local, layout.local_view_shape(tp_.size(), tp_.rank()));
    const LogicalSlice slice = layout.replicated() ? LogicalSlice{} : layout.local_slice(tp_.size(), tp_.rank());
    Generator g(seed ^ 0x5eed1d11a7e5eedULL);
    g.set_state({g.seed(), stream});
    auto ends_with = [&](const char* suf) {
      std::string s(suf);
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    // bf16/f16 parameters: drawn in f32 (the same numbers as an f32 model), then rounded.
    auto draw_normal = [&](double stddev) {
      if (!is_half(p.dtype())) return normal_(p, 0.0, stddev, &g, slice);
      Tensor wide = empty(p.shape(), DType::kF32, p.device());
      normal_(wide, 0.0, stddev, &g, slice);
      copy_(p, cast(wide, p.dtype()));
    };
    if (name.find(".ln_") != std::string::npos) {
      fill_(p, ends_with(".weight") ? 1.0 : 0.0);
    } else if (ends_with(".bias")) {
      fill_(p, 0.0);
    } else if (ends_with("c_proj.weight")) {
      draw_normal(std_out);
    } else {
      draw_normal(c_.initializer_range);
    }
  }
}

Tensor Gpt2Model::stage_forward(const Tensor& input, uint64_t stream0, int64_t T, int64_t chunk) const {
  MF_CHECK(chunk >= 0 && chunk < stage_.num_chunks(), "gpt2: chunk ", chunk, " of a stage with ", stage_.num_chunks());
  const bool embed = stage_.first && chunk == 0, head = stage_.last && chunk + 1 == stage_.num_chunks();
  Generator& gen = default_generator();
  // Evaluation draws nothing and leaves the generator alone.
  auto use_stream = [&](uint64_t k) {
    if (training()) gen.set_state({gen.seed(), stream0 + k});
  };
  const bool sp = sequence_parallel(tp_);
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
    // Sequence parallel: between the blocks each rank keeps its part of the sequence (B -> S(1)
    // is a local slice; ln_f's output is gathered back for the vocabulary-parallel head).
    if (sp) x = dist::box_axis(x, dist::Sbp::broadcast(), dist::Sbp::split(1), x.shape(), *tp_.comm);
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
  if (sp) x = dist::box_axis(x, dist::Sbp::split(1), dist::Sbp::broadcast(), {x.shape(0), T, x.shape(2)}, *tp_.comm);
  return x;
}

Tensor Gpt2Model::hidden(const Tensor& ids) const {
  MF_CHECK(stage_.first && stage_.last, "gpt2: the whole-model forward needs every layer (this is a pipeline stage)");
  MF_CHECK(ids.ndim() == 2, "gpt2: input ids must be (batch, seq), got ", ids.str());
  return stage_forward(ids, default_generator().state().next_stream, ids.shape(1));
}

Tensor Gpt2Model::logits(const Tensor& ids) const {
  return leave(head_unit(), nn::round_to(linear(hidden(ids), nn::compute(wte_->weight)), c_.dtype));
}

namespace {
// h (n, C), w (V / tp, C), labels (n) i64 on the host -> the mean cross-entropy over this
// piece's labels != -100. Mixed precision: bf16/f16 logits (rounded f32 ones on the CPU, stored
// bf16/f16 with native half kernels), the loss computed from them in f32 (Megatron's default),
// an f32 loss.
Tensor head_piece_loss(const Tensor& h, const Tensor& w, const Tensor& labels, int64_t vocab_size,
                       const nn::TensorParallel& tp, DType storage) {
  Tensor lg = nn::round_to(linear(h, nn::compute(w)), storage);  // (n, V / tp)
  if (!tp.enabled()) return cross_entropy(lg, labels);
  return dist::vocab_parallel_cross_entropy(lg, labels, vocab_size, *tp.comm);
}
}  // namespace

Tensor Gpt2Model::head_loss(const Tensor& hidden, const Tensor& labels) const {
  MF_CHECK(stage_.last, "gpt2: the loss is computed on the last pipeline stage");
  MF_CHECK(hidden.ndim() == 3 && labels.shape() == Shape({hidden.shape(0), hidden.shape(1)}), "gpt2: labels ",
           labels.str(), " must be (batch, seq) of the hidden state ", hidden.str());
  const Tensor& w = wte_->weight;  // (V / tp, C)
  Tensor flat = reshape(hidden, {-1, hidden.shape(2)});  // (N, C)
  // The labels on the host (copied there when on a GPU: one synchronisation per step): the chunk
  // counts below read them, and the loss range-checks each chunk's labels on the host and
  // uploads them itself (asynchronously), with no further synchronisation.
  Tensor tgt = contiguous(cast(to(reshape(labels, {-1}).detach(), cpu_device()), DType::kI64));  // (N) i64, host
  // Every tp rank must cut the same chunks (each chunk's loss is a collective): rows from the
  // largest shard of the vocabulary, not this rank's.
  const int64_t shard = (c_.vocab_size + tp_.size() - 1) / tp_.size();
  const int64_t N = flat.shape(0), rows = std::max<int64_t>(1, c_.head_chunk_elements / shard);
  // Full checkpointing recomputes each chunk's logits in backward: the head then holds one
  // chunk's logits and their gradient at a time instead of (N, V) twice, the largest activation
  // of a GPT-2 step. The weight is an input, not captured, so its chunks' gradients reach its
  // .grad through the caller's graph in the same order as without recomputation (and its
  // grad-ready hooks fire once).
  const bool recompute = c_.activation_checkpointing && c_.checkpoint_granularity == CheckpointGranularity::kFull &&
                         training() && grad_enabled() && w.requires_grad();
  const int64_t V = c_.vocab_size;
  const nn::TensorParallel tp = tp_;
  const DType dt = c_.dtype;
  auto piece_loss = [&](const Tensor& h, const Tensor& t) {
    if (!recompute) return head_piece_loss(h, w, t, V, tp, dt);
    auto fn = [t, V, tp, dt](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{head_piece_loss(in[0], in[1], t, V, tp, dt)};
    };
    return checkpoint(fn, {h, w})[0];
  };
  if (rows >= N) return leave(head_unit(), piece_loss(flat, tgt));
  // Chunks of rows: the mean over all valid labels is the sum of each chunk's mean weighted by
  // its share of them.
  const Tensor tgt_host = tgt.device().type == DeviceType::kCPU ? tgt : to(tgt, cpu_device());  // counted on the host
  const int64_t* lp = tgt_host.data<int64_t>();
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) valid += lp[i] != -100;
  Tensor total;
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    int64_t chunk_valid = 0;
    for (int64_t i = r0; i < r0 + n; ++i) chunk_valid += lp[i] != -100;
    if (chunk_valid == 0) continue;
    Tensor l = scale(piece_loss(narrow(flat, 0, r0, n), narrow(tgt, 0, r0, n)),
                     static_cast<double>(chunk_valid) / static_cast<double>(valid));
    total = total.defined() ? add(total, l) : l;
  }
  return leave(head_unit(), total.defined() ? total : scale(piece_loss(narrow(flat, 0, 0, 1), narrow(tgt, 0, 0, 1)), 0.0));
}

std::vector<nn::ParamUnit> Gpt2Model::parameter_units() const {
  const auto named = named_parameters();
  auto with_prefix = [&](std::initializer_list<std::string> prefixes) {
    std::vector<size_t> r;
    for (size_t k = 0; k < named.size(); ++k)
      for (const std::string& pre : prefixes)
        if (named[k].first.compare(0, pre.size(), pre) == 0) r.push_back(k);
    return r;
  };
  std::vector<nn::ParamUnit> units;
  if (stage_.first) units.push_back({0, 0, with_prefix({"transformer.wte.", "transformer.wpe."})});
  for (size_t k = 0; k < chunk_layers_.size(); ++k)
    for (int64_t l = chunk_layers_[k].first; l < chunk_layers_[k].second; ++l)
      units.push_back({1 + l, static_cast<int64_t>(k), with_prefix({"transformer.h." + std::to_string(l) + "."})});
  if (stage_.last)
    units.push_back({head_unit(), stage_.num_chunks() - 1, with_prefix({"transformer.ln_f.", "transformer.wte."})});
  return units;
}

Tensor Gpt2Model::loss(const Tensor& ids, const Tensor& labels) const {
  MF_CHECK(labels.shape() == ids.shape(), "gpt2: labels ", labels.str(), " must match ids ", ids.str());
  return head_loss(hidden(ids), labels);
}

int64_t Gpt2Model::num_logical_parameters() const {
  int64_t n = 0;
  for (const nn::ParamLayout& l : parameter_layouts()) n += shape_numel(l.logical);
  return n;
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
