#include "meshflow/models/bert/spec.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "meshflow/io/safetensors.h"
#include "meshflow/models/bert/model.h"
#include "meshflow/models/hf_weights.h"
#include "meshflow/models/schema_hf.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::bert {

namespace {

using json = nlohmann::ordered_json;

const char* bert_architecture(const BertConfig& c) {
  if (c.variant == BertVariant::kRoberta)
    return c.task == BertTask::kClassification ? "RobertaForSequenceClassification" : "RobertaForMaskedLM";
  if (c.task == BertTask::kClassification) return "BertForSequenceClassification";
  return c.add_binary_head ? "BertForPreTraining" : "BertForMaskedLM";
}

BertConfig bert_config_from_hf(const std::string& path) {
  std::string type;
  const json j = read_hf_config(path, {"bert", "roberta"}, &type);
  BertConfig c;
  c.variant = type == "roberta" ? BertVariant::kRoberta : BertVariant::kBert;
  std::string arch = c.variant == BertVariant::kRoberta ? "RobertaForMaskedLM" : "BertForPreTraining";
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  require_hf_string(j, path, "hidden_act", {"gelu"}, "meshflow's BERT uses gelu, the erf form");
  require_hf_string(j, path, "position_embedding_type", {"absolute"}, "absolute");
  MF_CHECK(arch != "RobertaForSequenceClassification", path,
           ": RobertaForSequenceClassification (its dense + tanh head on <s>) is not supported; "
           "RobertaForMaskedLM is");
  if (arch.ends_with("ForSequenceClassification")) {
    c.task = BertTask::kClassification;
    c.num_labels = j.contains("id2label") && j["id2label"].is_object() ? static_cast<int64_t>(j["id2label"].size())
                                                                        : io::json_get(j, path, "num_labels", 2);
  } else {
    c.task = BertTask::kPretraining;
  }
  c.add_binary_head = arch == "BertForPreTraining";
  if (c.variant == BertVariant::kRoberta) {  // RobertaConfig's defaults where they differ from BertConfig's
    c.vocab_size = 50265;
    c.num_tokentypes = 1;
    c.pad_token_id = 1;
  }
  read_hf_fields(bert_schema(), j, path, c);
  c.embedding_dropout_prob = c.output_dropout_prob;  // hidden_dropout_prob
  const int64_t positions = io::json_get(j, path, "max_position_embeddings", 512);
  c.max_seq_length = c.variant == BertVariant::kRoberta ? positions - c.pad_token_id - 1 : positions;
  return validated(std::move(c), path);
}

std::string bert_config_to_hf(const BertConfig& c, DType dtype) {
  const bool roberta = c.variant == BertVariant::kRoberta;
  json j = {{"architectures", {bert_architecture(c)}}, {"model_type", roberta ? "roberta" : "bert"}, {"hidden_act", "gelu"}};
  write_hf_fields(bert_schema(), c, j);
  j["max_position_embeddings"] = c.position_rows();
  j["position_embedding_type"] = "absolute";
  j["torch_dtype"] = io::torch_dtype_name(dtype);
  if (roberta) {
    j["bos_token_id"] = 0;
    j["eos_token_id"] = 2;
  }
  if (c.task == BertTask::kClassification) {
    json id2label = json::object(), label2id = json::object();
    for (int64_t k = 0; k < c.num_labels; ++k) {
      id2label[std::to_string(k)] = "LABEL_" + std::to_string(k);
      label2id["LABEL_" + std::to_string(k)] = k;
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
  }
  return j.dump(2) + "\n";
}

nn::NamedTensors read_hf_bert_tensors(const io::HfModelFiles& files, const BertConfig& c) {
  const std::string p = c.prefix();
  const bool roberta = c.variant == BertVariant::kRoberta;
  const std::string decoder = roberta ? "lm_head.decoder." : "cls.predictions.decoder.";
  HfWeightRules r;
  r.known = parameter_of(BertModel(c, ModelContext::shape_only()));
  // Heads of the family's other tasks a file may carry (bert-base-uncased's BertForMaskedLM
  // holds the pooler and next-sentence weights; roberta-base a pooler).
  const std::vector<std::string> other_heads = {p + "pooler.", "cls.", "lm_head.", "classifier."};
  const bool classifies = c.task == BertTask::kClassification;
  r.rename = [known = r.known, other_heads, decoder, classifies](const std::string& stored) {
    // The original checkpoints' LayerNorm names (bert-base-uncased's file), as Hugging Face reads them.
    std::string name = stored;
    if (name.ends_with("LayerNorm.gamma")) name = name.substr(0, name.size() - 5) + "weight";
    if (name.ends_with("LayerNorm.beta")) name = name.substr(0, name.size() - 4) + "bias";
    if (name.ends_with("embeddings.position_ids")) return std::string();  // a buffer
    if (known(name) || (!classifies && name.starts_with(decoder))) return name;
    for (const std::string& h : other_heads)
      if (name.starts_with(h)) return std::string();
    return name;  // unknown: refused
  };
  // The masked-LM decoder is tied to the word embedding, its bias to the head's.
  if (!classifies) {
    r.tied[decoder + "weight"] = {p + "embeddings.word_embeddings.weight", ""};
    r.tied[decoder + "bias"] = {roberta ? "lm_head.bias" : "cls.predictions.bias", ""};
  }
  r.model = describe(c);
  return read_hf_weights(files, r);
}

nn::NamedTensors write_hf_bert_tensors(const nn::NamedTensors& tensors) {
  nn::NamedTensors out = tensors;
  for (const auto& [name, t] : tensors) {
    if (name == "cls.predictions.bias") out.emplace_back("cls.predictions.decoder.bias", t);
    if (name == "lm_head.bias") out.emplace_back("lm_head.decoder.bias", t);
  }
  return out;
}

}  // namespace

HfMapping hf(BertVariant variant) {
  BertConfig pretraining;  // the variant's masked-LM class: what a pretraining run exports
  pretraining.variant = variant;
  HfMapping m = hf_mapping(bert_variant_name(variant), bert_architecture(pretraining), &bert_config_from_hf,
                           &bert_config_to_hf, &read_hf_bert_tensors, &bert_config, bert_schema());
  m.write_tensors = write_hf_bert_tensors;
  m.key_names.emplace_back("model.num_labels", "num_labels");
  return m;
}

}  // namespace mf::models::bert
