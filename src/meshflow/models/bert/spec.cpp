#include "meshflow/models/bert/spec.h"

#include "meshflow/models/bert/hf.h"
#include "meshflow/models/bert/model.h"

namespace mf::models::bert {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
BertConfig sizes(const Config& c) { return bert_config(c, 0); }

Config checkpoint_config(const nn::NamedTensors& tensors, const Config* run, const std::string& source) {
  MF_CHECK(run != nullptr, source, ": a BERT checkpoint needs the run's config.yaml (or a Hugging Face config.json) "
           "beside it: the head count and the task do not show in the tensors");
  BertConfig c = sizes(*run);
  for (const auto& [name, t] : tensors)  // the tokenizer may have padded model.vocab_size
    if (name == std::string(c.prefix()) + "embeddings.word_embeddings.weight" && t.ndim() == 2) c.vocab_size = t.shape(0);
  return bert_model_config(c);
}

ModelSpec spec(const char* name, const char* architecture) {
  ModelSpec s;
  s.name = name;
  s.build = [](const Config& c, int64_t vocab, const ModelContext& ctx) -> std::shared_ptr<Model> {
    auto m = std::make_shared<BertModel>(bert_config(c, vocab), ctx);
    m->init_weights(static_cast<uint64_t>(c.get_int("train.seed")));
    return m;
  };
  s.config_keys = bert_schema().config_keys();
  // What the tensors' shapes do not show (the task's heads do, and may be replaced).
  s.structure_keys = bert_schema().structure_keys();
  s.head_prefixes = {"bert.pooler.", "roberta.pooler.", "cls.", "lm_head.", "classifier."};
  s.parameter_shapes = [](const Config& c) { return bert_parameter_shapes(sizes(c)); };
  s.describe = [](const Config& c) { return bert_describe(sizes(c)); };
  s.checkpoint_config = checkpoint_config;
  s.hf.model_type = name;
  s.hf.architecture = architecture;
  s.hf.read_config = [](const std::string& path) { return bert_model_config(bert_config_from_hf(path)); };
  s.hf.write_config = [](const Config& c, DType dtype) { return bert_config_to_hf(sizes(c), dtype); };
  s.hf.read_tensors = [](const io::HfModelFiles& files) {
    return read_hf_bert_tensors(files, bert_config_from_hf(files.config));
  };
  s.hf.write_tensors = write_hf_bert_tensors;
  s.hf.key_names = bert_schema().hf_key_names();
  s.hf.key_names.emplace_back("model.num_labels", "num_labels");
  return s;
}

}  // namespace

ModelSpec bert_spec() { return spec("bert", "BertForPreTraining"); }
ModelSpec roberta_spec() { return spec("roberta", "RobertaForMaskedLM"); }

}  // namespace mf::models::bert
