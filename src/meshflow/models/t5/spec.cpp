#include "meshflow/models/t5/spec.h"

#include <limits>

#include "meshflow/models/t5/hf.h"
#include "meshflow/models/t5/model.h"

namespace mf::models::t5 {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
T5Config sizes(const Config& c) { return t5_config(c, 0); }

Config checkpoint_config(const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
  MF_CHECK(run != nullptr, source, ": a T5 checkpoint needs the run's config.yaml (or a Hugging Face config.json) beside "
           "it: the head count and the bucket sizes do not show in the tensors");
  T5Config c = sizes(*run);
  for (const auto& [name, t] : tensors)  // the tokenizer may have padded model.vocab_size
    if (name == "shared.weight" && t.ndim() == 2) c.vocab_size = t.shape(0);
  return t5_model_config(c);
}

ModelSpec spec(const char* name, const char* architecture) {
  ModelSpec s;
  s.name = name;
  s.build = [](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<T5Model>(t5_config(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
  s.config_keys = t5_schema().config_keys();
  // What the tensors' shapes do not show.
  s.structure_keys = t5_schema().structure_keys();
  s.structure_keys.emplace_back("model.feed_forward_proj");
  s.num_layers = [](const Config& c) {  // the encoder's and the decoder's blocks (0 decoder layers: as many)
    const int64_t enc = c.get_int("model.num_layers"), dec = c.get_int("model.num_decoder_layers");
    const int64_t d = dec == 0 ? enc : dec;
    MF_CHECK(enc <= std::numeric_limits<int64_t>::max() - d, "t5: model.num_layers ", enc, " and ",
             dec == 0 ? "as many decoder layers" : detail::cat("model.num_decoder_layers ", dec),
             " are more layers than int64 counts");
    return enc + d;
  };
  s.parameter_shapes = [](const Config& c) { return t5_parameter_shapes(sizes(c)); };
  s.describe = [](const Config& c) { return t5_describe(sizes(c)); };
  s.checkpoint_config = checkpoint_config;
  s.hf.model_type = name;
  s.hf.architecture = architecture;
  s.hf.read_config = [](const std::string& path) { return t5_model_config(t5_config_from_hf(path)); };
  s.hf.write_config = [](const Config& c, DType dtype) { return t5_config_to_hf(sizes(c), dtype); };
  s.hf.read_tensors = [](const io::HfModelFiles& files) { return read_hf_t5_tensors(files, t5_config_from_hf(files.config)); };
  s.hf.key_names = t5_schema().hf_key_names();
  s.hf.key_names.emplace_back("model.feed_forward_proj", "feed_forward_proj");
  return s;
}

}  // namespace

ModelSpec t5_spec() { return spec("t5", "T5ForConditionalGeneration"); }
ModelSpec mt5_spec() { return spec("mt5", "MT5ForConditionalGeneration"); }

}  // namespace mf::models::t5
