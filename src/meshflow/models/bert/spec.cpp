#include "meshflow/models/bert/spec.h"

#include "meshflow/models/bert/model.h"
#include "meshflow/models/spec_builder.h"

namespace mf::models::bert {

namespace {

// The sizes of a run config's model.* keys alone (no training settings).
BertConfig sizes(const Config& c) { return bert_config(c, 0); }

ModelSpec spec(BertVariant variant) {
  ModelSpec s = family_spec<BertModel>(bert_variant_name(variant), &bert_config, bert_schema());
  // The task heads: weights of another task load without them (the schema's structure keys do
  // not name model.task: the heads' tensors show it, and may be replaced).
  s.head_prefixes = {"bert.pooler.", "roberta.pooler.", "cls.", "lm_head.", "classifier."};
  // The masked LM projects the masked positions only (BertModel::mlm_loss); a classifier one row
  // per sequence.
  s.head_token_share = [](const Config& c, int64_t seq_len) {
    return c.get_string("model.task") == "pretraining" ? c.get_float("data.masked_lm_prob") : 1.0 / static_cast<double>(seq_len);
  };
  s.layer_activations = [](const Config& c, int64_t, int64_t) {
    // The post-norm block (layers/block.h) keeps what a GPT-2 block keeps, in another order: the
    // block input and the post-attention residual with both LayerNorms' statistics (sequence); the
    // GEMMs' saved inputs, the input and the first LayerNorm's output (gathered); q, k, v, the
    // attention output, the MLP's input projection and its GELU, the row log-sum-exp (split).
    const BertConfig b = sizes(c);
    const double C = static_cast<double>(b.hidden_size), F = static_cast<double>(b.ffn_hidden_size);
    const double heads = static_cast<double>(b.num_attention_heads);
    return LayerActivations{2 * C + 4, 2 * C, 4 * C + 2 * F + heads, heads};
  };
  s.checkpoint_config = checkpoint_config_from_run<BertConfig>(
      "BERT", "the head count and the task do", &sizes,
      [](const BertConfig& c) {
        return std::string(c.prefix()) + "embeddings.word_embeddings.weight";
      });
  s.hf = hf(variant);
  return s;
}

}  // namespace

ModelSpec bert_spec() { return spec(BertVariant::kBert); }
ModelSpec roberta_spec() { return spec(BertVariant::kRoberta); }

}  // namespace mf::models::bert
