#include "meshflow/models/mlp_lm/spec.h"

#include "meshflow/models/mlp_lm/model.h"

namespace mf::models::mlp_lm {

ModelSpec spec() {
  ModelSpec s;
  s.name = "mlp_lm";
  s.build = [](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<MlpLmModel>(mlp_lm_config(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
  s.config_keys = {"model.name", "model.num_layers", "model.hidden_size", "model.ffn_hidden_size", "model.vocab_size",
                   "model.embedding_dropout_prob", "model.output_dropout_prob", "model.layernorm_epsilon",
                   "model.initializer_range"};
  s.parameter_shapes = [](const Config& c) { return mlp_lm_parameter_shapes(mlp_lm_config(c, 0)); };
  s.describe = [](const Config& c) { return mlp_lm_describe(mlp_lm_config(c, 0)); };
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
