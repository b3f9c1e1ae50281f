// BERT and RoBERTa's sizes and options (the model.* section) — BertForPreTraining,
// RobertaForMaskedLM and BertForSequenceClassification are one encoder with options and heads —
// and its parameters' Hugging Face names and shapes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "meshflow/config/config.h"
#include "meshflow/core/device.h"
#include "meshflow/core/dtype.h"
#include "meshflow/core/shape.h"
#include "meshflow/models/model.h"
#include "meshflow/models/schema.h"

namespace mf::models {

// BERT: absolute positions 0.., token types, next-sentence prediction; RoBERTa: positions counted
// after the padding id (padding_idx + 1 onwards, pads at padding_idx), one token type, no NSP.
enum class BertVariant { kBert, kRoberta };
// model.task: pretraining = the masked-LM head tied to the word embedding (+ next-sentence
// prediction when model.add_binary_head; BertForPreTraining, RobertaForMaskedLM); classification =
// the pooler and a classifier over model.num_labels (BertForSequenceClassification).
enum class BertTask { kPretraining, kClassification };

struct BertConfig {
  BertVariant variant = BertVariant::kBert;
  BertTask task = BertTask::kPretraining;
  int64_t vocab_size = 30522;
  int64_t max_seq_length = 512;      // positions (RoBERTa's table holds pad_token_id + 1 more)
  int64_t hidden_size = 768;
  int64_t num_layers = 12;           // num_hidden_layers
  int64_t num_attention_heads = 12;
  int64_t ffn_hidden_size = 3072;    // intermediate_size
  int64_t num_tokentypes = 2;        // type_vocab_size
  int64_t pad_token_id = 0;          // RoBERTa: the padding id its positions count from
  bool add_binary_head = true;       // pretraining: next-sentence prediction (BERT only)
  int64_t num_labels = 2;            // classification
  double layernorm_epsilon = 1e-12;
  double embedding_dropout_prob = 0.1;  // hidden_dropout_prob on the embeddings
  double attention_dropout_prob = 0.1;  // attention_probs_dropout_prob
  double output_dropout_prob = 0.1;     // hidden_dropout_prob after each projection and before the classifier
  double initializer_range = 0.02;
  TrainingSettings settings;
  int64_t head_chunk_elements = int64_t{1} << 24;  // the masked-LM head's logits per chunk
  double masked_lm_prob = 0.15;      // data.masked_lm_prob: the share of positions the masked-LM head computes

  const char* prefix() const { return variant == BertVariant::kRoberta ? "roberta." : "bert."; }
  int64_t position_rows() const {
    return variant == BertVariant::kRoberta ? max_seq_length + pad_token_id + 1 : max_seq_length;
  }
  bool nsp() const { return task == BertTask::kPretraining && add_binary_head; }
  bool pooler() const { return nsp() || task == BertTask::kClassification; }
  void validate() const;  // throws naming the bad key
};

const char* bert_variant_name(BertVariant v);  // "bert", "roberta"
// The model.* keys (and training settings) of a run config; vocabulary at least the tokenizer's.
// Its hyperparameters but model.task (a choice of heads): model.* keys, Hugging Face keys, sizes
// and structure. model.name is the variant's.
const Schema<BertConfig>& bert_schema();
BertConfig bert_config(const Config& c, int64_t tokenizer_vocab_size);
// Its model.* keys as a run config writes them.
Config model_config(const BertConfig& c);
// "BERT (pretraining, NSP): layers 2, hidden 64, heads 4, MLP 256, vocabulary 30522, positions 128".
std::string describe(const BertConfig& c);

}  // namespace mf::models
