#include "meshflow/models/vit/config.h"

#include <iomanip>
#include <sstream>

#include "meshflow/ops/ops.h"

namespace mf::models {

DType VitConfig::activation_dtype(Device device) const {
  return native_half(device, settings.dtype) ? settings.dtype : compute_dtype(settings.dtype);
}

void VitConfig::validate() const {
  MF_CHECK(image_size > 0 && patch_size > 0 && num_channels > 0 && hidden_size > 0 && num_layers > 0 &&
               num_attention_heads > 0 && ffn_hidden_size > 0,
           "vit: model sizes must be positive (image_size ", image_size, ", patch_size ", patch_size, ", num_channels ",
           num_channels, ", hidden_size ", hidden_size, ", num_layers ", num_layers, ", num_attention_heads ",
           num_attention_heads, ", ffn_hidden_size ", ffn_hidden_size, ")");
  MF_CHECK(image_size % patch_size == 0, "vit: model.image_size ", image_size, " is not a multiple of model.patch_size ",
           patch_size);
  MF_CHECK(hidden_size % num_attention_heads == 0, "vit: model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads);
  MF_CHECK(num_labels >= 2, "vit: model.num_labels must be >= 2, got ", num_labels);
  for (double p : {embedding_dropout_prob, attention_dropout_prob, output_dropout_prob})
    MF_CHECK(p >= 0.0 && p < 1.0, "vit: dropout probabilities must be in [0, 1), got ", p);
  MF_CHECK(is_floating(settings.dtype), "vit: the parameter dtype must be f32, f64, bf16 or f16");
}

VitConfig vit_config(const Config& c) {
  VitConfig m;
  m.image_size = c.get_int("model.image_size");
  m.patch_size = c.get_int("model.patch_size");
  m.num_channels = c.get_int("model.num_channels");
  m.hidden_size = c.get_int("model.hidden_size");
  m.num_layers = c.get_int("model.num_layers");
  m.num_attention_heads = c.get_int("model.num_attention_heads");
  m.ffn_hidden_size = c.get_int("model.ffn_hidden_size");
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  m.num_labels = c.get_int("model.num_labels");
  m.layernorm_epsilon = c.get_float("model.layernorm_epsilon");
  m.embedding_dropout_prob = c.get_float("model.embedding_dropout_prob");
  m.attention_dropout_prob = c.get_float("model.attention_dropout_prob");
  m.output_dropout_prob = c.get_float("model.output_dropout_prob");
  m.initializer_range = c.get_float("model.initializer_range");
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config vit_model_config(const VitConfig& m) {
  Config y;
  auto num = [](double v) {
    std::ostringstream os;
    os << std::setprecision(17) << v;
    return os.str();
  };
  y.set("model.name", "vit");
  y.set("model.image_size", std::to_string(m.image_size));
  y.set("model.patch_size", std::to_string(m.patch_size));
  y.set("model.num_channels", std::to_string(m.num_channels));
  y.set("model.num_layers", std::to_string(m.num_layers));
  y.set("model.hidden_size", std::to_string(m.hidden_size));
  y.set("model.num_attention_heads", std::to_string(m.num_attention_heads));
  y.set("model.ffn_hidden_size", std::to_string(m.ffn_hidden_size));
  y.set("model.num_labels", std::to_string(m.num_labels));
  y.set("model.layernorm_epsilon", num(m.layernorm_epsilon));
  y.set("model.embedding_dropout_prob", num(m.embedding_dropout_prob));
  y.set("model.attention_dropout_prob", num(m.attention_dropout_prob));
  y.set("model.output_dropout_prob", num(m.output_dropout_prob));
  y.set("model.initializer_range", num(m.initializer_range));
  return y;
}

std::string vit_describe(const VitConfig& m) {
  return detail::cat("ViT: image ", m.image_size, ", patch ", m.patch_size, " (", m.num_patches(), " patches), layers ",
                     m.num_layers, ", hidden ", m.hidden_size, ", heads ", m.num_attention_heads, ", MLP ",
                     m.ffn_hidden_size, ", labels ", m.num_labels);
}

std::vector<std::pair<std::string, Shape>> vit_parameter_shapes(const VitConfig& m) {
  const int64_t C = m.hidden_size, F = m.ffn_hidden_size, P = m.patch_size;
  std::vector<std::pair<std::string, Shape>> out = {
      {"vit.embeddings.cls_token", {1, 1, C}},
      {"vit.embeddings.position_embeddings", {1, m.sequence_length(), C}},
      {"vit.embeddings.patch_embeddings.projection.weight", {C, m.num_channels, P, P}},
      {"vit.embeddings.patch_embeddings.projection.bias", {C}}};
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string q = "vit.encoder.layer." + std::to_string(l) + ".";
    for (const char* proj : {"query", "key", "value"}) {
      out.emplace_back(q + "attention.attention." + proj + ".weight", Shape{C, C});
      out.emplace_back(q + "attention.attention." + proj + ".bias", Shape{C});
    }
    out.emplace_back(q + "attention.output.dense.weight", Shape{C, C});
    out.emplace_back(q + "attention.output.dense.bias", Shape{C});
    out.emplace_back(q + "intermediate.dense.weight", Shape{F, C});
    out.emplace_back(q + "intermediate.dense.bias", Shape{F});
    out.emplace_back(q + "output.dense.weight", Shape{C, F});
    out.emplace_back(q + "output.dense.bias", Shape{C});
    out.emplace_back(q + "layernorm_before.weight", Shape{C});
    out.emplace_back(q + "layernorm_before.bias", Shape{C});
    out.emplace_back(q + "layernorm_after.weight", Shape{C});
    out.emplace_back(q + "layernorm_after.bias", Shape{C});
  }
  out.emplace_back("vit.layernorm.weight", Shape{C});
  out.emplace_back("vit.layernorm.bias", Shape{C});
  out.emplace_back("classifier.weight", Shape{m.num_labels, C});
  out.emplace_back("classifier.bias", Shape{m.num_labels});
  return out;
}

}  // namespace mf::models
