#include "meshflow/models/model.h"

#include "meshflow/random/generator.h"

namespace mf::models {

CheckpointGranularity parse_checkpoint_granularity(const std::string& name) {
  if (name == "full") return CheckpointGranularity::kFull;
  if (name == "selective") return CheckpointGranularity::kSelective;
  MF_THROW("train.activation_checkpoint.granularity '", name, "' is not one of full, selective");
}

TrainingSettings training_settings(const Config& c) {
  TrainingSettings s;
  if (c.get_bool("train.amp.enabled")) {
    const std::string d = c.get_string("train.amp.dtype");
    if (d == "bf16" || d == "bfloat16")
      s.dtype = DType::kBF16;
    else if (d == "fp16" || d == "f16" || d == "float16")
      s.dtype = DType::kF16;
    else
      MF_THROW("train.amp.dtype must be bf16 or fp16, got '", d, "'");
  }
  s.recompute = c.get_bool("train.activation_checkpoint.enabled");
  s.granularity = parse_checkpoint_granularity(c.get_string("train.activation_checkpoint.granularity"));
  s.recompute_start_layer = c.get_int("train.activation_checkpoint.start_layer");
  s.recompute_end_layer = c.get_int("train.activation_checkpoint.end_layer");
  return s;
}

std::vector<std::pair<int64_t, int64_t>> PipelineStage::chunk_layers(int64_t num_layers) const {
  std::vector<std::pair<int64_t, int64_t>> out = {{first_layer, end_layer < 0 ? num_layers : end_layer}};
  for (const auto& r : later_chunks) out.push_back(r);
  for (size_t k = 0; k < out.size(); ++k) {
    const auto [a, b] = out[k];
    MF_CHECK(a >= 0 && a <= b && b <= num_layers && (k == 0 || a >= out[k - 1].second), "model: pipeline stage chunk ", k,
             " layers [", a, ", ", b, ") outside [0, ", num_layers, ") or not after the previous chunk");
  }
  return out;
}

Tensor Model::loss(const Tensor& ids, const Tensor& labels) const {
  MF_CHECK(stage().whole(), "model: the whole-model loss needs every layer (this is a pipeline stage)");
  MF_CHECK(ids.ndim() == 2 && labels.shape() == ids.shape(), "model: ids ", ids.str(), " and labels ", labels.str(),
           " must both be (batch, seq)");
  return head_loss(stage_forward(ids, default_generator().state().next_stream, ids.shape(1)), labels);
}

std::vector<nn::ParamUnit> Model::layered_units(const std::vector<std::string>& embedding_prefixes,
                                                const std::string& layer_prefix,
                                                const std::vector<std::string>& head_prefixes,
                                                const std::vector<std::pair<int64_t, int64_t>>& chunk_layers,
                                                int64_t num_layers) const {
  const auto named = named_parameters();
  auto with_prefix = [&](const std::vector<std::string>& prefixes) {
    std::vector<size_t> r;
    for (size_t k = 0; k < named.size(); ++k)
      for (const std::string& pre : prefixes)
        if (named[k].first.compare(0, pre.size(), pre) == 0) r.push_back(k);
    return r;
  };
  std::vector<nn::ParamUnit> units;
  if (stage().first) units.push_back({0, 0, with_prefix(embedding_prefixes)});
  for (size_t k = 0; k < chunk_layers.size(); ++k)
    for (int64_t l = chunk_layers[k].first; l < chunk_layers[k].second; ++l)
      units.push_back({1 + l, static_cast<int64_t>(k), with_prefix({layer_prefix + std::to_string(l) + "."})});
  if (stage().last) units.push_back({num_layers + 1, stage().num_chunks() - 1, with_prefix(head_prefixes)});
  return units;
}

int64_t Model::num_logical_parameters() const {
  int64_t n = 0;
  for (const auto& [name, shape] : parameter_shapes()) n += shape_numel(shape);
  return n;
}

}  // namespace mf::models
