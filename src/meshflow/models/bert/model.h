// BERT and RoBERTa (BertForPreTraining, RobertaForMaskedLM, BertForSequenceClassification):
// post-LayerNorm encoder blocks (the shared layers::TransformerBlock, bert_block_spec) of
// bidirectional attention that skips padded keys (the batch's attention_mask) and a GELU (erf)
// MLP; word, position and token-type embeddings; the masked-LM head (dense, GELU, LayerNorm, then
// the word embedding as output projection with its own bias), the pooler (dense + tanh of the
// first token) with next-sentence prediction or a classifier. Parameter names, shapes and layouts
// are Hugging Face's ("bert.encoder.layer.0.attention.self.query.weight" is (hidden, hidden), the
// nn.Linear layout), so import/export is a plain mapping.
//
// Written once, on global tensors (layers/layers.h): query, key, value and the intermediate
// projection split their output features (whole heads), the attention output and the output
// projection their input features; the word embedding and the masked-LM bias split the
// vocabulary.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshflow/layers/block.h"
#include "meshflow/models/bert/config.h"
#include "meshflow/models/model.h"

namespace mf::models {

class BertModel : public ConfiguredModel<BertConfig> {
 public:
  explicit BertModel(const BertConfig& c, const ModelContext& ctx = {});
  // Hugging Face's initialisation: projections and embeddings N(0, initializer_range), biases 0,
  // LayerNorm weights 1 and biases 0. Parameter i draws from a generator of its own.
  void init_weights(uint64_t seed);
  // Whole model only, this rank's piece: the encoder's last hidden state (B, T, C); the masked-LM
  // logits (B, T, V) (pretraining; split on the vocabulary with the embedding); the
  // next-sentence logits (B, 2) (with NSP) or the class logits (B, num_labels) (classification).
  Tensor hidden_states(const Batch& batch) const;
  Tensor mlm_logits(const Batch& batch) const;
  Tensor pooled_logits(const Batch& batch) const;
  // Whole model: the masked-LM and next-sentence losses of `batch` (its own means), for tests.
  std::pair<Tensor, Tensor> pretraining_losses(const Batch& batch) const;

  std::vector<std::string> tied_parameters() const override;
  std::vector<nn::ParamUnit> parameter_units() const override;
  // 6 * (every parameter but the embedding lookups and the masked-LM head's) + 6 *
  // masked_lm_prob * (the masked-LM head's: transform and output projection, computed on the
  // predicted positions only) + 12 * layers * hidden * seq (attention scores and values,
  // bidirectional: the whole square).
  double flops_per_token(int64_t seq_len) const override;
  BatchKind batch_kind() const override {
    return c_.task == BertTask::kClassification ? BatchKind::kSequenceClassification : BatchKind::kMaskedLM;
  }
  // Pretraining: {masked tokens, rows with a next-sentence label (with NSP)}; classification: {rows}.
  std::vector<double> loss_counts(const Batch& batch) const override;
  std::vector<std::string> eval_metric_names() const override;

 protected:
  GlobalTensor embed(const GlobalTensor& ids, const Batch& batch) const override;
  GlobalTensor run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const override;
  GlobalTensor final_norm(const GlobalTensor& x) const override { return x; }  // post-LN: the last block's
  GlobalTensor head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const override;
  std::vector<std::pair<double, double>> metrics(const GlobalTensor& hidden, const Batch& batch) const override;
  uint64_t streams_per_layer() const override { return 3; }  // attention, attention output, MLP output dropout
  uint64_t head_streams() const override { return c_.task == BertTask::kClassification ? 1 : 0; }
  Shape hidden_shape(int64_t rows, int64_t seq_len) const override { return {rows, seq_len, c_.hidden_size}; }

 private:
  // hidden (B, T, C) B -> the masked-LM head's mean loss over the counted labels.
  GlobalTensor mlm_loss(const GlobalTensor& hidden, const Tensor& labels) const;
  // hidden (B, T, C) B -> the pooler's output (B, C) -> next-sentence or class logits (B, n).
  GlobalTensor pooled(const GlobalTensor& hidden) const;
  GlobalTensor classify(const GlobalTensor& hidden) const;

  std::shared_ptr<layers::Embedding> word_, position_, token_type_;
  std::shared_ptr<layers::LayerNorm> embed_norm_;
  std::vector<std::shared_ptr<layers::TransformerBlock>> layers_;  // by layer (shape-only where another rank holds it)
  std::shared_ptr<layers::Linear> pooler_, seq_relationship_, classifier_, transform_;
  std::shared_ptr<layers::LayerNorm> transform_norm_;
  std::shared_ptr<layers::RowBias> mlm_bias_;
};

}  // namespace mf::models
