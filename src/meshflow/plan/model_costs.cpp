#include "meshflow/plan/model_costs.h"

#include <cctype>

#include "meshflow/core/error.h"
#include "meshflow/models/model.h"
#include "meshflow/models/registry.h"
#include "meshflow/runtime/build.h"

namespace mf::plan {

namespace {

// The layer a parameter name belongs to: the first ".<digits>." component ("transformer.h.3.ln_1"),
// offset by `decoder_offset` under "decoder." (T5's decoder blocks follow the encoder's); -1: none.
int64_t layer_of(const std::string& name, int64_t decoder_offset) {
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] != '.' || !std::isdigit(static_cast<unsigned char>(name[i + 1]))) continue;
    size_t j = i + 1;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j < name.size() && name[j] != '.') continue;
    const int64_t l = std::stoll(name.substr(i + 1, j - i - 1));
    return name.rfind("decoder.", 0) == 0 ? decoder_offset + l : l;
  }
  return -1;
}

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
  MF_CHECK(spec.parameter_shapes != nullptr, "plan: model.name=", m.name, " does not list its parameters");
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
  const auto shapes = spec.parameter_shapes(c);
  // The vocabulary: the first 2-D parameter outside the layers (the input embedding's rows).
  int64_t decoder_offset = key_or(c, "model.num_layers", m.layers);
  for (const auto& [name, shape] : shapes)
    if (shape.size() == 2 && layer_of(name, decoder_offset) < 0) {
      m.vocab = shape[0];
      break;
    }
  m.layer_params.assign(static_cast<size_t>(m.layers), ParamElements{});
  int64_t last_layer = -1, vocab_tables = 0;
  for (const auto& [name, shape] : shapes) {
    const int64_t n = shape_numel(shape);
    const int64_t l = layer_of(name, decoder_offset);
    const bool vocab_table = shape.size() == 2 && shape[0] == m.vocab && shape.back() == m.hidden && l < 0;
    if (vocab_table) ++vocab_tables;
    ParamElements* part = nullptr;
    if (l >= 0 && l < m.layers) {
      part = &m.layer_params[static_cast<size_t>(l)];
      last_layer = l;
    } else if (last_layer < 0) {
      part = &m.embedding;
    } else if (vocab_table || name.find("lm_head") != std::string::npos || name.find("cls.") == 0 ||
               name.find("classifier") != std::string::npos || last_layer == m.layers - 1 || l >= m.layers) {
      part = &m.head;
    } else {
      part = &m.layer_params[static_cast<size_t>(last_layer)];  // a stack's final norm between stacks
    }
    // Megatron's splits: every matrix of a layer and the vocabulary tables; 1-D parameters of
    // the hidden size (norms, row-split biases) and position tables are replicated.
    const bool split = (l >= 0 && (shape.size() >= 2 || n != m.hidden)) || vocab_table;
    (split ? part->split : part->replicated) += static_cast<double>(n);
    ++part->tensors;
  }
  m.tied = vocab_tables == 1 && m.vocab > 0;
  if (m.tied) m.tied_copy.split = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  // What a layer keeps for backward: the model's own count, else a GPT-2 block's (BERT, ViT, T5
  // are counted as one).
  const double C = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn);
  m.layer_acts = spec.layer_activations ? spec.layer_activations(c)
                                        : LayerActivations{2 * C, 2 * C, 4 * C + 2 * F, static_cast<double>(m.heads)};
  // FLOPs: 2 per multiply-add of every layer matrix, 4 T C for the attention scores and values.
  double layer_matrix = 0;
  for (const ParamElements& p : m.layer_params) layer_matrix = std::max(layer_matrix, p.split);
  m.layer_flops = 2.0 * layer_matrix + 4.0 * static_cast<double>(m.seq) * C;
  m.head_flops = 2.0 * static_cast<double>(m.vocab) * C;
  return m;
}

}  // namespace mf::plan
