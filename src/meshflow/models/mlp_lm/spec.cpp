#include "meshflow/models/mlp_lm/spec.h"

#include "meshflow/models/mlp_lm/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::mlp_lm {

ModelSpec spec() {
  ModelSpec s = family_spec<MlpLmModel>("mlp_lm", &mlp_lm_config, mlp_lm_schema());
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // The MLP-only block (layers/block.h): the block input and its LayerNorm's statistics (sequence), the
    // LayerNorm output (gathered), fc1's output and its GELU (split); no attention.
    const MlpLmConfig m = mlp_lm_config(c, 0);
    const double C = static_cast<double>(m.hidden_size), F = static_cast<double>(m.ffn());
    return LayerActivations{C + 2, C, 2 * F, 0};
  };
  s.checkpoint_config = [](const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
    MF_CHECK(run != nullptr, source, ": an mlp_lm checkpoint needs the run's config.yaml beside it");
    Config c = *run;
    for (const auto& [name, t] : tensors)
      if (name == "wte.weight" && t.ndim() == 2) c.set("model.vocab_size", std::to_string(t.shape(0)), source);
    return c;
  };
  return s;
}

}  // namespace mf::models::mlp_lm
