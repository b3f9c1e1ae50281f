#include "meshflow/models/bert/config.h"

#include <algorithm>

#include "meshflow/ops/ops.h"

namespace mf::models {

const char* bert_variant_name(BertVariant v) { return v == BertVariant::kRoberta ? "roberta" : "bert"; }

void BertConfig::validate() const {
  const char* v = bert_variant_name(variant);
  bert_schema().check(*this, v);
  MF_CHECK(hidden_size % num_attention_heads == 0, v, ": model.hidden_size ", hidden_size,
           " is not divisible by model.num_attention_heads ", num_attention_heads);
  MF_CHECK(task != BertTask::kClassification || num_labels >= 2, v, ": model.num_labels must be >= 2 for classification, got ",
           num_labels);
  MF_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, v, ": model.pad_token_id ", pad_token_id,
           " is outside the vocabulary of ", vocab_size);
  MF_CHECK(variant == BertVariant::kBert || !add_binary_head, v,
           ": RoBERTa has no next-sentence prediction (model.add_binary_head must be false)");
  MF_CHECK(variant == BertVariant::kBert || task == BertTask::kPretraining, v,
           ": model.task classification is BERT's (BertForSequenceClassification); RoBERTa's classification head "
           "(dense + tanh on <s>, no pooler) is not implemented");
  settings.check(v);
}

const Schema<BertConfig>& bert_schema() {
  using C = BertConfig;
  // max_position_embeddings (RoBERTa's counts the padding) and hidden_dropout_prob (both
  // dropouts) are read by hand.
  static const Schema<C> s = Schema<C>("bert")
      .transformer({.max_seq_length = ""})
      .size("model.num_tokentypes", &C::num_tokentypes, "type_vocab_size").positive()
      .structure("model.pad_token_id", &C::pad_token_id, "pad_token_id")
      .size("model.add_binary_head", &C::add_binary_head)
      .size("model.num_labels", &C::num_labels)
      .key("model.task");
  return s;
}

BertConfig bert_config(const Config& c, int64_t tokenizer_vocab_size) {
  BertConfig m;
  const std::string name = c.get_string("model.name");
  m.variant = name == "roberta" ? BertVariant::kRoberta : BertVariant::kBert;
  const std::string task = c.get_string("model.task");
  MF_CHECK(task == "pretraining" || task == "classification", name, ": model.task '", task,
           "' is not one of pretraining, classification");
  m.task = task == "classification" ? BertTask::kClassification : BertTask::kPretraining;
  bert_schema().read(c, m);
  m.vocab_size = std::max(m.vocab_size, tokenizer_vocab_size);
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  m.add_binary_head = m.add_binary_head && m.variant == BertVariant::kBert;
  m.masked_lm_prob = c.get_float("data.masked_lm_prob");
  m.settings = training_settings(c);
  m.validate();
  return m;
}

Config model_config(const BertConfig& m) {
  Config y = bert_schema().write(m);
  y.set("model.name", bert_variant_name(m.variant));
  y.set("model.task", m.task == BertTask::kClassification ? "classification" : "pretraining");
  return y;
}

std::string describe(const BertConfig& m) {
  const char* head = m.task == BertTask::kClassification ? "classification" : m.nsp() ? "pretraining, NSP" : "masked LM";
  std::string s = detail::cat(m.variant == BertVariant::kRoberta ? "RoBERTa" : "BERT", " (", head, "): layers ",
                              m.num_layers, ", hidden ", m.hidden_size, ", heads ", m.num_attention_heads, ", MLP ",
                              m.ffn_hidden_size, ", vocabulary ", m.vocab_size, ", positions ", m.max_seq_length);
  if (m.task == BertTask::kClassification) s += detail::cat(", labels ", m.num_labels);
  return s;
}


}  // namespace mf::models
