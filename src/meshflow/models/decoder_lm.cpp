#include "meshflow/models/decoder_lm.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"

namespace mf::models {

DecoderLm::DecoderLm(DecoderLmSpec spec, const ModelContext& ctx) : Model(ctx, spec.num_layers), s_(std::move(spec)) {
  const DType dt = s_.settings.dtype;
  // The parts under the root module (none: on the model itself).
  auto root = s_.root.empty() ? nullptr : register_module(s_.root, std::make_shared<nn::ModuleGroup>());
  auto add = [&](const std::string& name, auto module) { return root ? root->add(name, module) : register_module(name, module); };
  // The token embedding, also the output projection when the two are tied.
  const layers::Place& table = s_.tie_word_embeddings ? shared_placement() : embedding_placement();
  embed_ = add(s_.embed, std::make_shared<layers::Embedding>(s_.vocab_size, s_.hidden_size, table, true, dt));
  if (!s_.positions.empty())
    positions_ = add(s_.positions, std::make_shared<layers::Embedding>(s_.max_seq_length, s_.hidden_size,
                                                                            embedding_placement(), false, dt));
  auto group = add(s_.layers, std::make_shared<nn::ModuleGroup>());
  for (int64_t l = 0; l < s_.num_layers; ++l)
    blocks_.push_back(group->add(std::to_string(l), std::make_shared<layers::TransformerBlock>(s_.block, layer_placement(l), dt)));
  const layers::Place& head = head_placement();
  if (s_.final_norm_kind == layers::NormKind::kRMSNorm)
    norm_ = add(s_.final_norm, std::make_shared<layers::RMSNorm>(s_.hidden_size, s_.final_norm_eps, head, dt));
  else
    norm_ = add(s_.final_norm, std::make_shared<layers::LayerNorm>(s_.hidden_size, s_.final_norm_eps, head, dt));
  if (!s_.tie_word_embeddings)
    head_ = register_module(s_.head, std::make_shared<layers::Embedding>(s_.vocab_size, s_.hidden_size, head, true, dt));
}

DType DecoderLm::activation_dtype(Device device) const {
  return native_half(device, s_.settings.dtype) ? s_.settings.dtype : compute_dtype(s_.settings.dtype);
}

TrainingSettings decoder_settings(DType dtype, bool recompute, CheckpointGranularity granularity, int64_t start_layer,
                                  int64_t end_layer) {
  TrainingSettings t;
  t.dtype = dtype;
  t.recompute = recompute;
  t.granularity = granularity;
  t.recompute_start_layer = start_layer;
  t.recompute_end_layer = end_layer;
  return t;
}

void DecoderLm::init_weights(uint64_t seed) {
  const double std_scaled = s_.initializer_range / std::sqrt(2.0 * static_cast<double>(s_.num_layers));
  init_normal(
      seed, [](const std::string&, const Shape& shape) { return shape.size() == 1; },  // a norm's weight
      [&](const std::string& name, const Shape&) {
        const bool scaled = std::any_of(s_.scaled_init.begin(), s_.scaled_init.end(),
                                        [&](const std::string& suffix) { return name.ends_with(suffix); });
        return scaled ? std_scaled : s_.initializer_range;
      });
}

std::string DecoderLm::rooted(const std::string& name) const { return s_.root.empty() ? name : s_.root + "." + name; }

std::vector<std::string> DecoderLm::tied_parameters() const {
  if (!s_.tie_word_embeddings) return {};
  return {rooted(s_.embed + ".weight")};
}

GlobalTensor DecoderLm::embed(const GlobalTensor& ids, const Batch& batch) const {
  const int64_t T = ids.logical_shape[1] + (batch.decode ? batch.decode->past : 0);
  MF_CHECK(T > 0 && (s_.max_seq_length == 0 || T <= s_.max_seq_length), s_.family, ": sequence length ", T,
           " must be in [1, model.max_seq_length = ", s_.max_seq_length, "]");
  GlobalTensor x = embed_->forward(ids);  // (B, T, C)
  if (positions_) {
    // Learned positions: 0 .. T-1, or decoding each row's (B, T) after its cached ones.
    const int64_t t = ids.logical_shape[1];
    const Tensor pos = batch.decode ? batch.decode->positions(t) : arange(t, DType::kI64);
    x = layers::round_to(global::add(x, positions_->forward(global::broadcast_beside(ids, pos))), s_.settings.dtype);  // + (T, C)
  }
  return layers::dropout(x, training() ? s_.embedding_dropout : 0.0, s_.settings.dtype);
}

GlobalTensor DecoderLm::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  const layers::LayerDecode decode = batch.decode ? batch.decode->layer(layer) : layers::LayerDecode{};
  layers::BlockInputs in;
  in.self.decode = batch.decode ? &decode : nullptr;
  in.self.key_padding = key_padding_mask(batch);
  return blocks_.at(static_cast<size_t>(layer))->forward(x, recompute_inside, in);
}

GlobalTensor DecoderLm::output_logits(const GlobalTensor& hidden) const {
  return output_table().project(hidden);  // (B, T, C) -> (B, T, V)
}

std::optional<CheckpointGranularity> DecoderLm::recomputation(int64_t layer) const {
  return s_.settings.recomputation(layer, s_.num_layers);
}

GlobalTensor DecoderLm::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  const GlobalTensor mean =
      layers::lm_loss(hidden, batch.labels, output_table(), s_.settings.loss_options(s_.head_chunk_elements, training()));
  return step_share(mean, static_cast<double>(counted_labels(batch.labels)), totals.at(0));
}

Tensor DecoderLm::logits(const Tensor& ids) const {
  return run_whole(ids, [this](const GlobalTensor& h) { return output_logits(h); });
}

std::vector<nn::ParamUnit> DecoderLm::parameter_units() const {
  const std::string table = rooted(s_.embed + ".");
  std::vector<std::string> embedding = {table};
  if (!s_.positions.empty()) embedding.push_back(rooted(s_.positions + "."));
  return layered_units(embedding, rooted(s_.layers + "."),
                       {rooted(s_.final_norm + "."), s_.tie_word_embeddings ? table : s_.head + "."});
}

double DecoderLm::flops_per_token(int64_t seq_len) const {
  const std::string table = rooted(s_.embed + ".weight"), positions = rooted(s_.positions + ".weight");
  double params = 0.0;
  for (const auto& [name, shape] : parameter_shapes())
    if ((name != table || s_.tie_word_embeddings) && name != positions) params += static_cast<double>(shape_numel(shape));
  const layers::AttentionSpec& a = s_.block.attention;
  const double attention = a.heads > 0 ? 12.0 * static_cast<double>(s_.num_layers * a.heads * a.dim() * seq_len) : 0.0;
  return 6.0 * params + attention;
}

}  // namespace mf::models
