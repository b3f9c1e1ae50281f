#include "meshflow/models/bert/model.h"

#include <unordered_map>

#include "meshflow/autograd/grad_mode.h"
#include "meshflow/layers/lm_loss.h"

namespace mf::models {

namespace {

// BERT's (and RoBERTa's) layer as a spec of the shared block (layers/block.h): post-LayerNorm,
// bidirectional attention with biases (attention.self.{query,key,value}, attention.output.dense),
// an exact-GELU MLP (intermediate.dense, output.dense), the norms attention.output.LayerNorm and
// output.LayerNorm; registered in that order.
layers::BlockSpec bert_block_spec(const BertConfig& c) {
  layers::BlockSpec s = layers::encoder_block_spec(c.hidden_size, c.num_attention_heads, c.ffn_hidden_size,
                                                   c.layernorm_epsilon, c.attention_dropout_prob, c.output_dropout_prob,
                                                   "attention.self");
  s.residual = layers::Residual::kPostNorm;
  s.norm1 = "attention.output.LayerNorm";
  s.norm2 = "output.LayerNorm";
  s.order = {layers::BlockPart::kAttention, layers::BlockPart::kNorm1, layers::BlockPart::kMlp, layers::BlockPart::kNorm2};
  return s;
}

}  // namespace

BertModel::BertModel(const BertConfig& c, const ModelContext& ctx) : ConfiguredModel(c, ctx, c.num_layers) {
  c.validate();
  using layers::WeightSplit;
  const DType dt = c.settings.dtype;
  const int64_t C = c.hidden_size;
  const bool pretraining = c.task == BertTask::kPretraining;
  auto root = register_module(c.variant == BertVariant::kRoberta ? "roberta" : "bert", std::make_shared<nn::ModuleGroup>());
  auto emb = root->add("embeddings", std::make_shared<nn::ModuleGroup>());
  // The word embedding, also the masked-LM head's output projection.
  const layers::Place& table = pretraining ? shared_placement() : embedding_placement();
  word_ = emb->add("word_embeddings", std::make_shared<layers::Embedding>(c.vocab_size, C, table, true, dt));
  const layers::Place& e = embedding_placement();
  position_ = emb->add("position_embeddings", std::make_shared<layers::Embedding>(c.position_rows(), C, e, false, dt));
  token_type_ = emb->add("token_type_embeddings", std::make_shared<layers::Embedding>(c.num_tokentypes, C, e, false, dt));
  embed_norm_ = emb->add("LayerNorm", std::make_shared<layers::LayerNorm>(C, c.layernorm_epsilon, e, dt, true));
  auto encoder = root->add("encoder", std::make_shared<nn::ModuleGroup>());
  auto group = encoder->add("layer", std::make_shared<nn::ModuleGroup>());
  for (int64_t l = 0; l < c.num_layers; ++l)
    layers_.push_back(
        group->add(std::to_string(l), std::make_shared<layers::TransformerBlock>(bert_block_spec(c), layer_placement(l), dt)));
  const layers::Place* p = &head_placement();
  if (c.pooler()) {
    auto pooler = root->add("pooler", std::make_shared<nn::ModuleGroup>());
    pooler_ = pooler->add("dense", std::make_shared<layers::Linear>(C, C, *p, WeightSplit::kNone, dt, true,
                                                                    layers::SplitUnits{}, layers::Activation::kTanh));
  }
  if (c.task == BertTask::kClassification) {
    classifier_ = register_module("classifier", std::make_shared<layers::Linear>(C, c.num_labels, *p, WeightSplit::kNone, dt, true));
  } else if (c.variant == BertVariant::kRoberta) {
    mlm_bias_ = register_module("lm_head", std::make_shared<layers::RowBias>(c.vocab_size, *p, true, dt));
    transform_ = mlm_bias_->add("dense", std::make_shared<layers::Linear>(C, C, *p, WeightSplit::kNone, dt, true,
                                                                       layers::SplitUnits{}, layers::Activation::kGelu));
    transform_norm_ = mlm_bias_->add("layer_norm", std::make_shared<layers::LayerNorm>(C, c.layernorm_epsilon, *p, dt));
  } else {
    auto cls = register_module("cls", std::make_shared<nn::ModuleGroup>());
    mlm_bias_ = cls->add("predictions", std::make_shared<layers::RowBias>(c.vocab_size, *p, true, dt));
    auto transform = mlm_bias_->add("transform", std::make_shared<nn::ModuleGroup>());
    transform_ = transform->add("dense", std::make_shared<layers::Linear>(C, C, *p, WeightSplit::kNone, dt, true,
                                                                       layers::SplitUnits{}, layers::Activation::kGelu));
    transform_norm_ = transform->add("LayerNorm", std::make_shared<layers::LayerNorm>(C, c.layernorm_epsilon, *p, dt));
    if (c.nsp())
      seq_relationship_ = cls->add("seq_relationship", std::make_shared<layers::Linear>(C, 2, *p, WeightSplit::kNone, dt, true));
  }
}

void BertModel::init_weights(uint64_t seed) {
  init_normal(
      seed,
      [](const std::string& name, const Shape&) {
        return name.find("LayerNorm.") != std::string::npos || name.find("layer_norm.") != std::string::npos;
      },
      [this](const std::string&, const Shape&) { return c_.initializer_range; });
}

std::vector<std::string> BertModel::tied_parameters() const {
  if (c_.task != BertTask::kPretraining) return {};
  return {std::string(c_.prefix()) + "embeddings.word_embeddings.weight"};
}

std::vector<nn::ParamUnit> BertModel::parameter_units() const {
  const std::string p = c_.prefix();
  std::vector<std::string> head;
  if (c_.pooler()) head.push_back(p + "pooler.");
  if (c_.task == BertTask::kClassification) {
    head.push_back("classifier.");
  } else {
    head.push_back(c_.variant == BertVariant::kRoberta ? "lm_head." : "cls.");
    head.push_back(p + "embeddings.word_embeddings.");
  }
  return layered_units({p + "embeddings."}, p + "encoder.layer.", head);
}

double BertModel::flops_per_token(int64_t seq_len) const {
  const std::string p = c_.prefix();
  double params = 0.0;
  const bool pretraining = c_.task == BertTask::kPretraining;
  for (const auto& [name, shape] : parameter_shapes()) {
    const bool lookup = name.compare(0, p.size() + 11, p + "embeddings.") == 0;
    const bool decoder = name == p + "embeddings.word_embeddings.weight" && pretraining;
    const bool mlm_head = decoder || name.compare(0, 16, "cls.predictions.") == 0 || name.compare(0, 8, "lm_head.") == 0;
    if (mlm_head)
      params += c_.masked_lm_prob * static_cast<double>(shape_numel(shape));
    else if (!lookup)
      params += static_cast<double>(shape_numel(shape));
  }
  return 6.0 * params + 12.0 * static_cast<double>(c_.num_layers * c_.hidden_size * seq_len);
}

std::vector<double> BertModel::loss_counts(const Batch& batch) const {
  const double rows = static_cast<double>(batch.rows());
  if (c_.task == BertTask::kClassification) return {rows};
  if (c_.nsp()) return {static_cast<double>(counted_labels(batch.labels)), rows};
  return {static_cast<double>(counted_labels(batch.labels))};
}

std::vector<std::string> BertModel::eval_metric_names() const {
  if (c_.task == BertTask::kClassification) return {"accuracy"};
  if (c_.nsp()) return {"mlm_loss", "nsp_accuracy"};
  return {"mlm_loss"};
}

GlobalTensor BertModel::embed(const GlobalTensor& ids, const Batch& batch) const {
  const int64_t B = ids.logical_shape[0], T = ids.logical_shape[1];
  MF_CHECK(T > 0 && T <= c_.max_seq_length, bert_variant_name(c_.variant), ": sequence length ", T,
           " must be in [1, model.max_seq_length = ", c_.max_seq_length, "]");
  Tensor positions;
  if (c_.variant == BertVariant::kRoberta) {  // padding_idx + 1 onwards over the real tokens, pads at padding_idx
    const Tensor h = host_i64(batch.input_ids);
    positions = empty({B, T}, DType::kI64);
    const int64_t* id = h.data<int64_t>();
    int64_t* pos = positions.data<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      int64_t n = 0;
      for (int64_t t = 0; t < T; ++t) {
        const bool real = id[b * T + t] != c_.pad_token_id;
        n += real;
        pos[b * T + t] = real ? c_.pad_token_id + n : c_.pad_token_id;
      }
    }
  } else {
    positions = arange(T, DType::kI64);  // (T)
  }
  const Tensor types = batch.token_type_ids.defined() ? host_i64(batch.token_type_ids) : zeros({B, T}, DType::kI64);
  MF_CHECK(types.shape() == Shape({B, T}), bert_variant_name(c_.variant), ": token_type_ids ", types.str(),
           " must be (batch, seq) = (", B, ", ", T, ")");
  GlobalTensor x = global::add(word_->forward(ids), token_type_->forward(global::broadcast_beside(ids, types)));
  x = global::add(x, position_->forward(global::broadcast_beside(ids, positions)));  // (B, T, C) + (B, T, C) or (T, C)
  x = embed_norm_->forward(x);
  return global::dropout(x, training() ? c_.embedding_dropout_prob : 0.0);
}

GlobalTensor BertModel::run_layer(int64_t layer, const GlobalTensor& x, const Batch& batch, bool recompute_inside) const {
  layers::BlockInputs in;
  in.self.key_padding = key_padding_mask(batch);
  return layers_.at(static_cast<size_t>(layer))->forward(x, recompute_inside, in);
}

GlobalTensor BertModel::mlm_loss(const GlobalTensor& hidden, const Tensor& labels) const {
  // Only the predicted positions go through the head: the rows of hidden (B T, C) whose label
  // counts (one ignored row when none does, so that the head's parameters still get a gradient).
  const Tensor flat = contiguous(reshape(host_i64(labels), {-1}));
  const int64_t* lp = flat.data<int64_t>();
  std::vector<int64_t> rows, kept;
  for (int64_t i = 0; i < flat.numel(); ++i)
    if (lp[i] != -100) {
      rows.push_back(i);
      kept.push_back(lp[i]);
    }
  if (rows.empty()) {
    rows.push_back(0);
    kept.push_back(-100);
  }
  const int64_t n = static_cast<int64_t>(rows.size()), C = c_.hidden_size;
  const GlobalTensor picked = global::index_select(global::reshape(hidden, {-1, C}), 0, from_vector(rows, {n}));  // (n, C)
  const GlobalTensor t = transform_norm_->forward(transform_->forward(picked));  // (n, C)
  layers::LmLossOptions o = c_.settings.loss_options(c_.head_chunk_elements, training());
  o.bias = mlm_bias_.get();
  return layers::lm_loss(t, from_vector(kept, {n}), *word_, o);
}

GlobalTensor BertModel::pooled(const GlobalTensor& hidden) const {
  return pooler_->forward(global::select(hidden, 1, 0));  // (B, C)
}

GlobalTensor BertModel::classify(const GlobalTensor& hidden) const {
  const GlobalTensor x = global::dropout(pooled(hidden), training() ? c_.output_dropout_prob : 0.0);
  return classifier_->forward(x);  // (B, num_labels)
}

GlobalTensor BertModel::head(const GlobalTensor& hidden, const Batch& batch, const std::vector<double>& totals) const {
  const char* v = bert_variant_name(c_.variant);
  const int64_t B = hidden.logical_shape[0];
  const double rows = static_cast<double>(B);
  auto row_labels = [&](const Tensor& t, const char* what) {
    MF_CHECK(t.defined() && t.shape() == Shape{B}, v, ": ", what, " must be (batch) = (", B, "), got ",
             t.defined() ? t.str() : std::string("none"));
    return global::broadcast_beside(hidden, host_i64(t));
  };
  if (c_.task == BertTask::kClassification) {
    const GlobalTensor loss = global::cross_entropy(classify(hidden), row_labels(batch.labels, "the class labels"));
    return step_share(loss, rows, totals.at(0));
  }
  MF_CHECK(batch.labels.defined() && batch.labels.shape() == Shape({B, hidden.logical_shape[1]}), v,
           ": masked-LM labels must be (batch, seq), got ", batch.labels.defined() ? batch.labels.str() : std::string("none"));
  GlobalTensor loss = step_share(mlm_loss(hidden, batch.labels), static_cast<double>(counted_labels(batch.labels)), totals.at(0));
  if (!c_.nsp()) return loss;
  const GlobalTensor nsp =
      global::cross_entropy(seq_relationship_->forward(pooled(hidden)), row_labels(batch.next_sentence_label, "next_sentence_label"));
  return global::add(loss, step_share(nsp, rows, totals.at(1)));
}

std::vector<std::pair<double, double>> BertModel::metrics(const GlobalTensor& hidden, const Batch& batch) const {
  if (c_.task == BertTask::kClassification) return {argmax_accuracy(classify(hidden).local, batch.labels)};
  // The masked-LM loss alone (mean over every evaluated masked token) and the next-sentence accuracy.
  const double n = static_cast<double>(counted_labels(batch.labels));
  std::vector<std::pair<double, double>> out = {{n > 0 ? mlm_loss(hidden, batch.labels).local.item() * n : 0.0, n}};
  if (c_.nsp()) out.push_back(argmax_accuracy(seq_relationship_->forward(pooled(hidden)).local, batch.next_sentence_label));
  return out;
}

Tensor BertModel::hidden_states(const Batch& batch) const {
  return run_whole(batch, [](const GlobalTensor& h) { return h; });
}

Tensor BertModel::mlm_logits(const Batch& batch) const {
  MF_CHECK(c_.task == BertTask::kPretraining, "bert: the masked-LM logits need model.task pretraining");
  return run_whole(batch, [this](const GlobalTensor& h) {  // (B, T, C) -> (B, T, V)
    return word_->project(transform_norm_->forward(transform_->forward(h)), mlm_bias_->value());
  });
}

Tensor BertModel::pooled_logits(const Batch& batch) const {
  MF_CHECK(c_.pooler(), "bert: no pooler (masked LM without next-sentence prediction)");
  return run_whole(batch, [this](const GlobalTensor& h) {
    return c_.task == BertTask::kClassification ? classify(h) : seq_relationship_->forward(pooled(h));
  });
}

std::pair<Tensor, Tensor> BertModel::pretraining_losses(const Batch& batch) const {
  MF_CHECK(c_.task == BertTask::kPretraining, "bert: pretraining losses need model.task pretraining");
  Tensor nsp;
  const Tensor mlm = run_whole(batch, [&](const GlobalTensor& h) {
    if (c_.nsp())
      nsp = global::cross_entropy(seq_relationship_->forward(pooled(h)), global::broadcast_beside(h, host_i64(batch.next_sentence_label))).local;
    return mlm_loss(h, batch.labels);
  });
  return {mlm, nsp};
}

}  // namespace mf::models
