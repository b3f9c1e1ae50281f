#include "meshflow/models/mlp_lm/model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/checkpoint.h"
#include "meshflow/autograd/grad_mode.h"
#include "meshflow/nn/init.h"
#include "meshflow/layers/lm_loss.h"

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

MlpLmBlock::MlpLmBlock(const MlpLmConfig& c, const layers::Place& place) : c_(c) {
  const DType dt = c.settings.dtype;
  norm_ = register_module("norm", std::make_shared<layers::LayerNorm>(c.hidden_size, c.layernorm_epsilon, place, dt));
  fc1_ = register_module("fc1", std::make_shared<layers::Conv1D>(c.hidden_size, c.ffn(), place, layers::WeightSplit::kColumns,
                                                                 dt, 1, layers::SplitUnits{1, "model.ffn_hidden_size"}));
  fc2_ = register_module("fc2", std::make_shared<layers::Conv1D>(c.ffn(), c.hidden_size, place, layers::WeightSplit::kRows, dt));
}

GlobalTensor MlpLmBlock::forward(const GlobalTensor& x) const {
  const DType st = c_.settings.dtype;
  GlobalTensor h = fc2_->forward(layers::round_to(global::gelu(fc1_->forward(norm_->forward(x))), st));
  return layers::round_to(global::add(x, global::dropout(h, training() ? c_.output_dropout_prob : 0.0)), st);
}

MlpLmModel::MlpLmModel(const MlpLmConfig& c, const ModelContext& ctx) : Model(ctx, c.num_layers), c_(c) {
  const DType dt = c.settings.dtype;
  // The token embedding, also the output projection (tied).
  wte_ = register_module("wte", std::make_shared<layers::Embedding>(c.vocab_size, c.hidden_size, shared_placement(), true, dt));
  auto group = register_module("layers", std::make_shared<nn::ModuleGroup>());
  for (int64_t l = 0; l < c.num_layers; ++l)
    blocks_.push_back(group->add(std::to_string(l), std::make_shared<MlpLmBlock>(c, layer_placement(l))));
  norm_ = register_module("norm", std::make_shared<layers::LayerNorm>(c.hidden_size, c.layernorm_epsilon, head_placement(), dt));
}

void MlpLmModel::init_weights(uint64_t seed) {
  NoGradGuard ng;
  std::unordered_map<std::string, uint64_t> index;
  for (const auto& [name, shape] : parameter_shapes()) index.emplace(name, index.size());
  const double std_out = c_.initializer_range / std::sqrt(2.0 * static_cast<double>(c_.num_layers));
  for (const nn::ParamPiece& p : parameter_pieces()) {
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

GlobalTensor MlpLmModel::embed(const GlobalTensor& ids, const Batch&) const {
  const GlobalTensor x = global::dropout(wte_->forward(ids), training() ? c_.embedding_dropout_prob : 0.0);  // (B, T, C)
  return layers::round_to(x, c_.settings.dtype);
}

GlobalTensor MlpLmModel::run_layer(int64_t layer, const GlobalTensor& x, const Batch&, bool) const {
  return blocks_.at(static_cast<size_t>(layer))->forward(x);
}

std::optional<CheckpointGranularity> MlpLmModel::recomputation(int64_t layer) const {
  if (!c_.settings.recomputes(layer, c_.num_layers)) return std::nullopt;
  return CheckpointGranularity::kFull;
}

GlobalTensor MlpLmModel::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  layers::LmLossOptions o;
  o.storage = c_.settings.dtype;
  return step_share(layers::lm_loss(hidden, batch.labels, *wte_, o), static_cast<double>(counted_labels(batch.labels)), totals.at(0));
}

DType MlpLmModel::activation_dtype(Device device) const {
  const DType dt = c_.settings.dtype;
  return native_half(device, dt) ? dt : compute_dtype(dt);
}


std::vector<nn::ParamUnit> MlpLmModel::parameter_units() const {
  return layered_units({"wte."}, "layers.", {"norm.", "wte."});
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
