#include "meshflow/models/vit/config.h"


#include "meshflow/ops/ops.h"

namespace mf::models {

void VitConfig::validate() const {
  vit_schema().check(*this, "vit");
  MF_CHECK(image_size % patch_size == 0, "vit: model.image_size ", image_size, " is not a multiple of model.patch_size ",
           patch_size);
  MF_CHECK(hidden_size % num_attention_heads == 0, "vit: model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads);
  settings.check("vit");
}

const Schema<VitConfig>& vit_schema() {
  using C = VitConfig;
  // num_labels (from id2label) and hidden_dropout_prob (both dropouts) are read by hand.
  static const Schema<C> s = Schema<C>("vit")
      .transformer()
      .size("model.image_size", &C::image_size, "image_size")
      .structure("model.patch_size", &C::patch_size, "patch_size")
      .size("model.num_channels", &C::num_channels, "num_channels")
      .size("model.num_labels", &C::num_labels).at_least(2);
  return s;
}

VitConfig vit_config(const Config& c) {
  VitConfig m;
  vit_schema().read(c, m);
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config model_config(const VitConfig& m) { return vit_schema().write(m); }

std::string describe(const VitConfig& m) {
  return detail::cat("ViT: image ", m.image_size, ", patch ", m.patch_size, " (", m.num_patches(), " patches), layers ",
                     m.num_layers, ", hidden ", m.hidden_size, ", heads ", m.num_attention_heads, ", MLP ",
                     m.ffn_hidden_size, ", labels ", m.num_labels);
}


}  // namespace mf::models
