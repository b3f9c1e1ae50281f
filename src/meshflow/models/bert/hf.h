// Hugging Face BERT and RoBERTa files (BertForPreTraining, BertForMaskedLM,
// BertForSequenceClassification, RobertaForMaskedLM): config.json <-> meshflow's BERT sizes and
// options, and the weight files' tensors under meshflow's parameter names (which are Hugging
// Face's: a plain mapping; the position_ids buffers dropped, the decoder tied to the word
// embedding and its bias checked and dropped, heads of another task the files carry dropped).
#pragma once
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/bert/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> sizes and options; the task from "architectures" (…ForSequenceClassification:
// classification with len(id2label) or num_labels labels; BertForPreTraining: next-sentence
// prediction; …ForMaskedLM: none). Throws naming the file and the key for what meshflow's BERT
// does not compute the same way (an activation other than gelu, relative positions).
BertConfig bert_config_from_hf(const std::string& config_json_path);
// config.json text for these sizes and options, torch_dtype `dtype`.
std::string bert_config_to_hf(const BertConfig& c, DType dtype);
// The architecture config.json names for `c` ("BertForPreTraining", ...).
const char* bert_architecture(const BertConfig& c);
// The weight files' tensors under the model's parameter names of `c`; dtypes kept.
nn::NamedTensors read_hf_bert_tensors(const io::HfModelFiles& files, const BertConfig& c);
// The model's tensors as a Hugging Face loader reads them: the tied decoder's bias beside
// cls.predictions.bias / lm_head.bias (the weight stays tied and unwritten).
nn::NamedTensors write_hf_bert_tensors(const nn::NamedTensors& tensors);

}  // namespace mf::models
