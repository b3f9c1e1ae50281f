#include "meshflow/plan/model_costs.h"

#include "meshflow/core/error.h"
#include "meshflow/layers/place.h"
#include "meshflow/models/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/runtime/build.h"

namespace mf::plan {

namespace {

int64_t key_or(const Config& c, const std::string& key, int64_t fallback) {
  return c.has(key) ? c.get_int(key) : fallback;
}

}  // namespace

double ModelCosts::total_params() const {
  double n = embedding.total() + head.total();
  for (const ParamElements& p : layer_params) n += p.total();
  return n;
}

ModelCosts model_costs(const Config& c) {
  ModelCosts m;
  m.name = c.get_string("model.name");
  const models::ModelSpec& spec = models::model_spec(m.name);
  MF_CHECK(spec.layer_activations != nullptr, "plan: model.name=", m.name,
           " has no activation-memory formula (ModelSpec::layer_activations): the planner cannot size its layers");
  m.layers = models::model_layers(c);
  m.hidden = c.get_int("model.hidden_size");
  m.heads = std::max<int64_t>(1, c.get_int("model.num_attention_heads"));
  const int64_t kv = key_or(c, "model.num_key_value_heads", 0);
  m.kv_heads = kv > 0 ? kv : m.heads;
  m.ffn = c.get_int("model.ffn_hidden_size") > 0 ? c.get_int("model.ffn_hidden_size") : 4 * m.hidden;
  m.seq = runtime::sequence_length(c);
  const models::TrainingSettings ts = models::training_settings(c);
  m.amp = ts.dtype == DType::kBF16 || ts.dtype == DType::kF16;
  m.param_bytes = static_cast<int64_t>(dtype_nbytes(ts.dtype));
  m.grad_bucket_mb = c.get_float("train.dist.grad_bucket_mb");
  // The whole model built shape-only, its layers declaring every split they take over tensor
  // parallelism: its parameters, how each splits, and the unit (embedding, layer, head) each
  // belongs to — the first unit that uses it (a tied table: the embedding; T5's bias table: its
  // stack's first block).
  const std::shared_ptr<models::Model> model =
      models::build_model(c, 0, models::ModelContext::shape_only(layers::Place::kAnyRanks));
  const auto declared = model->declared_parameters();
  const auto shapes = model->parameter_shapes();
  std::vector<int64_t> unit_of(shapes.size(), -1);
  for (const nn::ParamUnit& u : model->parameter_units())
    for (size_t k : u.params)
      if (unit_of.at(k) < 0) unit_of[k] = u.id;
  const int64_t head_unit = m.layers + 1;
  // The vocabulary: the embedding's first 2-D parameter (the input embedding's rows); a model
  // without a token table (ViT) has the head's first 2-D parameter's rows (its classes).
  for (int64_t unit : {int64_t{0}, head_unit}) {
    for (size_t k = 0; k < shapes.size() && m.vocab == 0; ++k)
      if (unit_of[k] == unit && shapes[k].second.size() == 2) m.vocab = shapes[k].second[0];
    if (m.vocab > 0) break;
  }
  m.layer_params.assign(static_cast<size_t>(m.layers), ParamElements{});
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto& [name, shape] = shapes[k];
    MF_CHECK(unit_of[k] >= 0 && unit_of[k] <= head_unit, "plan: ", m.name, "'s parameter ", name, " is in no unit");
    const int64_t l = unit_of[k] - 1;
    const bool in_layer = l >= 0 && l < m.layers;
    ParamElements* part = unit_of[k] == 0 ? &m.embedding : in_layer ? &m.layer_params[static_cast<size_t>(l)] : &m.head;
    // The layers' own splits (Megatron's: the column- and row-split matrices, the column-split
    // biases, the vocabulary tables); norms, row-split biases and position tables are replicated.
    const bool split = !declared[k].second.replicated();
    (split ? part->split : part->replicated) += static_cast<double>(shape_numel(shape));
    ++part->tensors;
  }
  m.tied = !model->tied_parameters().empty() && m.vocab > 0;
  if (m.tied) m.tied_copy.split = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  for (int64_t l = 0; l < m.layers; ++l) m.layer_acts.push_back(spec.layer_activations(c, l, m.seq));  // kept for backward
  const double C = static_cast<double>(m.hidden);
  // FLOPs: 2 per multiply-add of every layer matrix, 4 T C for the attention scores and values.
  double layer_matrix = 0;
  for (const ParamElements& p : m.layer_params) layer_matrix = std::max(layer_matrix, p.split);
  m.layer_flops = 2.0 * layer_matrix + 4.0 * static_cast<double>(m.seq) * C;
  m.head_token_share = spec.head_token_share ? spec.head_token_share(c, m.seq) : 1.0;
  m.head_flops = 2.0 * static_cast<double>(m.vocab) * C * m.head_token_share;
  return m;
}

}  // namespace mf::plan
