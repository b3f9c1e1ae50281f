#include "meshflow/models/mlp_lm/model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/nn/init.h"
#include "meshflow/parallel/lm_head.h"

namespace mf::models {

MlpLmConfig mlp_lm_config(const Config& c, int64_t tokenizer_vocab_size) {
  MlpLmConfig m;
  m.vocab_size = std::max(c.get_int("model.vocab_size"), tokenizer_vocab_size);
  m.hidden_size = c.get_int("model.hidden_size");
  m.ffn_hidden_size = c.get_int("model.ffn_hidden_size");
  m.num_layers = c.get_int("model.num_layers");
  m.embedding_dropout_prob = c.get_float("model.embedding_dropout_prob");
  m.output_dropout_prob = c.get_float("model.output_dropout_prob");
  m.layernorm_epsilon = c.get_float("model.layernorm_epsilon");
  m.initializer_range = c.get_float("model.initializer_range");
  m.settings = training_settings(c);
  MF_CHECK(m.vocab_size > 0 && m.hidden_size > 0 && m.ffn() > 0 && m.num_layers > 0, "mlp_lm: model sizes must be "
           "positive (vocab_size ", m.vocab_size, ", hidden_size ", m.hidden_size, ", ffn_hidden_size ", m.ffn(),
           ", num_layers ", m.num_layers, ")");
  for (double p : {m.embedding_dropout_prob, m.output_dropout_prob})
    MF_CHECK(p >= 0.0 && p < 1.0, "mlp_lm: dropout probabilities must be in [0, 1), got ", p);
  return m;
}

MlpLmBlock::MlpLmBlock(const MlpLmConfig& c, const nn::TensorParallel& tp) : c_(c), tp_(tp) {
  const DType dt = c.settings.dtype;
  norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layernorm_epsilon, dt));
  fc1_ = register_module("fc1", std::make_shared<parallel::ColumnConv1D>(c.hidden_size, c.ffn(), tp, 1, dt,
                                                                         parallel::SplitUnits{1, "model.ffn_hidden_size"}));
  fc2_ = register_module("fc2", std::make_shared<parallel::RowConv1D>(c.ffn(), c.hidden_size, tp, dt));
}

Tensor MlpLmBlock::forward(const Tensor& x, int64_t seq_len) const {
  const int64_t T = parallel::logical_sequence_length(x, seq_len, tp_);
  const DType st = c_.settings.dtype;
  Tensor h = fc2_->forward(nn::round_to(gelu(fc1_->forward(norm_->forward(x), T), true), st), T);
  return nn::round_to(add(x, parallel::sequence_dropout(h, training() ? c_.output_dropout_prob : 0.0, T, tp_)), st);
}

MlpLmModel::MlpLmModel(const MlpLmConfig& c, const ModelContext& ctx) : Model(ctx), c_(c) {
  chunk_layers_ = stage().chunk_layers(c.num_layers);
  const DType dt = c.settings.dtype;
  const nn::TensorParallel& tp = ctx.tp;
  if (stage().first || stage().last)
    wte_ = register_module("wte", std::make_shared<parallel::VocabParallelEmbedding>(c.vocab_size, c.hidden_size, tp, dt));
  auto layers = register_module("layers", std::make_shared<nn::ModuleGroup>());
  for (const auto& [a, b] : chunk_layers_)
    for (int64_t i = a; i < b; ++i) blocks_.push_back(layers->add(std::to_string(i), std::make_shared<MlpLmBlock>(c, tp)));
  if (stage().last) norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layernorm_epsilon, dt));
}

void MlpLmModel::init_weights(uint64_t seed) {
  NoGradGuard ng;
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  const double std_out = c_.initializer_range / std::sqrt(2.0 * static_cast<double>(c_.num_layers));
  for (const nn::ParamPiece& p : nn::param_pieces(*this, tensor_parallel())) {
    Generator g = nn::param_generator(seed, index.at(p.name));
    auto ends_with = [&](const std::string& suf) {
      return p.name.size() >= suf.size() && p.name.compare(p.name.size() - suf.size(), suf.size(), suf) == 0;
    };
    Tensor t = p.piece;
    if (p.name.find("norm.") != std::string::npos)
      fill_(t, ends_with(".weight") ? 1.0 : 0.0);
    else if (ends_with(".bias"))
      fill_(t, 0.0);
    else
      nn::normal_piece_(p, ends_with("fc2.weight") ? std_out : c_.initializer_range, g);
  }
}

Tensor MlpLmModel::stage_forward(const Tensor& input, uint64_t stream0, int64_t T, int64_t chunk) const {
  const PipelineStage& st = stage();
  MF_CHECK(chunk >= 0 && chunk < st.num_chunks(), "mlp_lm: chunk ", chunk, " of a stage with ", st.num_chunks());
  Generator& gen = default_generator();
  auto use_stream = [&](uint64_t k) {  // evaluation draws nothing and leaves the generator alone
    if (training()) gen.set_state({gen.seed(), stream0 + k});
  };
  const nn::TensorParallel& tp = tensor_parallel();
  Tensor x = input;
  if (st.first && chunk == 0) {
    MF_CHECK(input.ndim() == 2 && input.shape(1) == T, "mlp_lm: input ids must be (batch, ", T, "), got ", input.str());
    enter(0);
    use_stream(0);
    x = dropout(wte_->forward(input), training() ? c_.embedding_dropout_prob : 0.0);  // (B, T, C)
    x = leave(0, parallel::scatter_to_sequence_parallel(nn::round_to(x, c_.settings.dtype), tp));
  }
  int64_t offset = 0;  // index in blocks_ of this chunk's first block
  for (int64_t k = 0; k < chunk; ++k) offset += chunk_layers_[static_cast<size_t>(k)].second - chunk_layers_[static_cast<size_t>(k)].first;
  const auto [layer0, layer_end] = chunk_layers_[static_cast<size_t>(chunk)];
  const TrainingSettings& s = c_.settings;
  for (int64_t layer = layer0; layer < layer_end; ++layer) {
    use_stream(1 + static_cast<uint64_t>(layer));
    auto blk = blocks_[static_cast<size_t>(offset + layer - layer0)];
    enter(1 + layer);
    if (s.recomputes(layer, c_.num_layers) && training() && grad_enabled())
      x = checkpoint([blk, T](const std::vector<Tensor>& in) { return std::vector<Tensor>{blk->forward(in[0], T)}; }, {x})[0];
    else
      x = blk->forward(x, T);
    x = leave(1 + layer, x);
  }
  use_stream(streams_per_forward());
  if (!(st.last && chunk + 1 == st.num_chunks())) return x;
  enter(head_unit());  // left in head_loss()
  return parallel::gather_from_sequence_parallel(norm_->forward(x), T, tp);
}

Tensor MlpLmModel::head_loss(const Tensor& hidden, const Tensor& labels) const {
  MF_CHECK(stage().last, "mlp_lm: the loss is computed on the last pipeline stage");
  MF_CHECK(hidden.ndim() == 3 && labels.shape() == Shape({hidden.shape(0), hidden.shape(1)}), "mlp_lm: labels ",
           labels.str(), " must be (batch, seq) of the hidden state ", hidden.str());
  parallel::LmLossOptions o;
  o.storage = c_.settings.dtype;
  return leave(head_unit(), parallel::lm_head_loss(hidden, labels, wte_, o));
}

Shape MlpLmModel::activation_shape(int64_t rows, int64_t seq_len) const {
  return {rows, parallel::sequence_piece_length(seq_len, tensor_parallel()), c_.hidden_size};
}

DType MlpLmModel::activation_dtype(Device device) const {
  const DType dt = c_.settings.dtype;
  return native_half(device, dt) ? dt : compute_dtype(dt);
}

std::vector<std::pair<std::string, Shape>> mlp_lm_parameter_shapes(const MlpLmConfig& c) {
  const int64_t C = c.hidden_size, F = c.ffn();
  std::vector<std::pair<std::string, Shape>> out = {{"wte.weight", {c.vocab_size, C}}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (auto& e : std::vector<std::pair<std::string, Shape>>{{"norm.weight", {C}}, {"norm.bias", {C}},
                                                               {"fc1.weight", {C, F}}, {"fc1.bias", {F}},
                                                               {"fc2.weight", {F, C}}, {"fc2.bias", {C}}})
      out.emplace_back(p + e.first, e.second);
  }
  out.emplace_back("norm.weight", Shape{C});
  out.emplace_back("norm.bias", Shape{C});
  return out;
}

std::vector<nn::ParamUnit> MlpLmModel::parameter_units() const {
  return layered_units({"wte."}, "layers.", {"norm.", "wte."}, chunk_layers_, c_.num_layers);
}

double MlpLmModel::flops_per_token(int64_t) const {
  // 6 FLOPs per multiply-add parameter and token: the blocks' GEMMs and the tied head's.
  const double C = static_cast<double>(c_.hidden_size), F = static_cast<double>(c_.ffn());
  return 6.0 * (static_cast<double>(c_.num_layers) * 2.0 * C * F + static_cast<double>(c_.vocab_size) * C);
}

Config MlpLmModel::model_config() const {
  Config y;
  y.set("model.name", "mlp_lm");
  y.set("model.num_layers", std::to_string(c_.num_layers));
  y.set("model.hidden_size", std::to_string(c_.hidden_size));
  y.set("model.ffn_hidden_size", std::to_string(c_.ffn_hidden_size));
  y.set("model.vocab_size", std::to_string(c_.vocab_size));
  return y;
}

std::string mlp_lm_describe(const MlpLmConfig& c) {
  return detail::cat("MLP LM: layers ", c.num_layers, ", hidden ", c.hidden_size, ", MLP ", c.ffn(), ", vocabulary ",
                     c.vocab_size);
}

}  // namespace mf::models
