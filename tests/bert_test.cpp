// BERT and RoBERTa (BertForPreTraining with next-sentence prediction, RobertaForMaskedLM,
// BertForSequenceClassification) against a reference written independently in PyTorch from
// Hugging Face's conventions (scripts/make_bert_golden.py), on a padded batch (rows of 9, 6 and 4
// real tokens, token types, masked-LM labels): the encoder's hidden states, the logits, the
// masked-LM and next-sentence losses and every parameter gradient, f64 (1e-9) and f32 (1e-5;
// gradients within PyTorch's own f32 accuracy on the same model).
#include <cstdio>

#include "golden_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/models/bert/model.h"
#include "meshflow/models/registry.h"

namespace {
using namespace mft;
using json = nlohmann::json;
using mf::models::BertConfig;
using mf::models::BertModel;
using mf::models::BertTask;
using mf::models::BertVariant;

BertConfig config_of(const json& g, DType dt) {
  BertConfig c;
  c.variant = g["model_type"] == "roberta" ? BertVariant::kRoberta : BertVariant::kBert;
  c.task = g["task"] == "classification" ? BertTask::kClassification : BertTask::kPretraining;
  c.add_binary_head = g["task"] == "pretraining";
  c.num_labels = g["num_labels"] > 0 ? g["num_labels"].get<int64_t>() : 2;
  c.vocab_size = g["vocab_size"];
  c.hidden_size = g["hidden_size"];
  c.num_layers = g["num_layers"];
  c.num_attention_heads = g["num_attention_heads"];
  c.ffn_hidden_size = g["ffn_hidden_size"];
  c.num_tokentypes = g["type_vocab_size"];
  c.pad_token_id = g["pad_token_id"];
  c.max_seq_length = g["max_position_embeddings"].get<int64_t>() - (c.variant == BertVariant::kRoberta ? c.pad_token_id + 1 : 0);
  c.layernorm_epsilon = g["layer_norm_eps"];
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  c.settings.dtype = dt;
  return c;
}

mf::models::Batch batch_of(const json& g) {
  mf::models::Batch b;
  b.input_ids = int_tensor(g["input_ids"]);
  b.token_type_ids = int_tensor(g["token_type_ids"]);
  b.attention_mask = int_tensor(g["attention_mask"]);
  b.labels = int_tensor(g["labels"]);
  if (g.contains("next_sentence_label")) b.next_sentence_label = int_tensor(g["next_sentence_label"]);
  return b;
}

void check_against_golden(DType dt, double rtol) {
  const json all = golden_file("bert_tiny.json");
  ASSERT_EQ(all["cases"].size(), 3u);
  for (const json& g : all["cases"]) {
    const std::string name = g["config"]["name"];
    SCOPED_TRACE(name);
    BertModel model(config_of(g["config"], dt));
    model.eval();  // no dropout (the reference has none)
    load_golden_weights(model, g["weights"], dt);
    const mf::models::Batch b = batch_of(g);
    expect_rel_close(model.hidden_states(b), g["hidden_states"].get<std::vector<double>>(), rtol, "hidden states");
    const bool classification = model.config().task == BertTask::kClassification;
    expect_rel_close(classification ? model.pooled_logits(b) : model.mlm_logits(b), g["logits"].get<std::vector<double>>(),
                     rtol, "logits");
    if (g.contains("seq_relationship_logits"))
      expect_rel_close(model.pooled_logits(b), g["seq_relationship_logits"].get<std::vector<double>>(), rtol,
                       "next-sentence logits");
    if (!classification) {
      const auto [mlm, nsp] = model.pretraining_losses(b);
      EXPECT_NEAR(mlm.item(), g["mlm_loss"].get<double>(), rtol * g["mlm_loss"].get<double>());
      if (g.contains("nsp_loss")) {
        EXPECT_NEAR(nsp.item(), g["nsp_loss"].get<double>(), rtol * g["nsp_loss"].get<double>());
      }
    }
    model.train();
    Tensor loss = model.loss(b);
    EXPECT_NEAR(loss.item(), g["loss"].get<double>(), rtol * g["loss"].get<double>());
    loss.backward();
    // Key biases get an exactly zero gradient (a shift of every score of a row): PyTorch's f64
    // leaves rounding noise there, so they are held to an absolute bound at the gradients' scale.
    double scale = 0;
    for (auto& [pname, t] : model.named_parameters())
      for (double v : g["grads"][pname].get<std::vector<double>>()) scale = std::max(scale, std::abs(v));
    const std::vector<std::string> zero = g["zero_grad_params"].get<std::vector<std::string>>();
    // In f32, within 3 times PyTorch's own f32 error on the same case: the BLAS's kernel (AVX2 or
    // AVX-512) orders the sums differently (2.1 times PyTorch's, bert_classification's key weight,
    // on a 2-core AMD EPYC with AVX2 only); the f64 test holds the arithmetic to rtol.
    const double grad_tol = dt == DType::kF32 ? std::max(rtol, 3.0 * g["torch_f32_grad_error"].get<double>()) : rtol;
    double worst = 0;
    for (auto& [pname, t] : model.named_parameters()) {
      if (std::find(zero.begin(), zero.end(), pname) != zero.end()) {
        for (double v : to_f64(t.grad())) EXPECT_LE(std::abs(v), (dt == DType::kF32 ? 1e-6 : 1e-13) * scale) << pname;
        continue;
      }
      const double e = rel_error(t.grad(), g["grads"][pname].get<std::vector<double>>());
      EXPECT_LE(e, grad_tol) << "grad " << pname;
      worst = std::max(worst, e);
    }
    std::printf("%s %s: largest gradient error %.3g (tolerance %.3g; PyTorch f32 %.3g)\n", name.c_str(),
                mf::dtype_name(dt), worst, grad_tol, g["torch_f32_grad_error"].get<double>());
  }
}

TEST(Bert, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(Bert, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

// The loss of a batch split in two micro-batches, each scaled by its share of the masked tokens
// and rows (Model::loss_counts), adds up to the whole batch's loss; gradients too.
TEST(Bert, MicroBatchSharesAddUpToTheBatch) {
  const json g = golden_file("bert_tiny.json")["cases"][0];
  const mf::models::Batch b = batch_of(g);
  auto rows = [&](int64_t r0, int64_t n) {
    mf::models::Batch p;
    p.input_ids = mf::narrow(b.input_ids, 0, r0, n);
    p.token_type_ids = mf::narrow(b.token_type_ids, 0, r0, n);
    p.attention_mask = mf::narrow(b.attention_mask, 0, r0, n);
    p.labels = mf::narrow(b.labels, 0, r0, n);
    p.next_sentence_label = mf::narrow(b.next_sentence_label, 0, r0, n);
    return p;
  };
  BertModel whole(config_of(g["config"], DType::kF64)), split(config_of(g["config"], DType::kF64));
  load_golden_weights(whole, g["weights"], DType::kF64);
  load_golden_weights(split, g["weights"], DType::kF64);
  Tensor l = whole.loss(b);
  l.backward();
  const std::vector<double> totals = whole.loss_counts(b);
  double sum = 0;
  for (const auto& [r0, n] : {std::pair<int64_t, int64_t>{0, 1}, {1, 2}}) {
    const mf::models::Batch p = rows(r0, n);
    Tensor h = split.stage_forward(p, Tensor(), 0, p.input_ids.shape(1));
    Tensor part = split.head_loss(h, p, totals);
    part.backward();
    sum += part.item();
  }
  EXPECT_NEAR(sum, l.item(), 1e-12);
  auto a = whole.named_parameters(), c = split.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) expect_close(c[i].second.grad(), to_f64(a[i].second.grad()), 1e-12, 1e-12, a[i].first);
}

// Names and shapes are Hugging Face's, initialisation is theirs, the heads follow the task.
TEST(Bert, NamesInitAndHeads) {
  BertConfig c = config_of(golden_file("bert_tiny.json")["cases"][0]["config"], DType::kF32);
  BertModel m(c);
  m.init_weights(7);
  const auto shapes = m.parameter_shapes();
  const auto named = m.named_parameters();
  ASSERT_EQ(shapes.size(), named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, shapes[i].first);
    EXPECT_EQ(named[i].second.shape(), shapes[i].second) << named[i].first;
    const std::vector<double> v = to_f64(named[i].second);
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    const double mean = sum / static_cast<double>(v.size());
    const std::string& n = named[i].first;
    if (n.find("LayerNorm.weight") != std::string::npos) {
      EXPECT_EQ(mean, 1.0) << n;
    } else if (n.size() > 4 && n.compare(n.size() - 4, 4, "bias") == 0) {
      EXPECT_EQ(sq, 0.0) << n;
    } else if (v.size() >= 1000) {
      EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), c.initializer_range, 0.1 * c.initializer_range) << n;
    }
  }
  EXPECT_EQ(m.tied_parameters(), std::vector<std::string>{"bert.embeddings.word_embeddings.weight"});
  c.task = BertTask::kClassification;
  c.num_labels = 5;
  BertModel cls(c);
  EXPECT_EQ(cls.parameter_shapes().back(), (std::pair<std::string, mf::Shape>{"classifier.bias", {5}}));
  EXPECT_TRUE(cls.tied_parameters().empty());
  EXPECT_EQ(cls.eval_metric_names(), std::vector<std::string>{"accuracy"});
  c.num_labels = 1;
  MFT_EXPECT_ERROR(BertModel{c}, "model.num_labels must be >= 2");
  c.task = BertTask::kPretraining;
  BertModel b(config_of(golden_file("bert_tiny.json")["cases"][0]["config"], DType::kF32));
  mf::models::Batch too_long(mf::zeros({1, 17}, DType::kI64), mf::zeros({1, 17}, DType::kI64));
  MFT_EXPECT_ERROR(b.loss(too_long), "sequence length 17");
}

// The configs shipped for the published sizes build models of the published parameter counts
// (bert-base-uncased 109,482,240 with its pooler; bert-large-uncased 335,141,888;
// roberta-base 124,645,632, here with its MLM head).
TEST(Bert, ShippedConfigsHaveThePublishedSizes) {
  const std::string dir = std::string(MESHFLOW_SOURCE_DIR) + "/configs/bert/";
  auto params = [](const mf::Config& c, const std::vector<std::string>& skip) {
    int64_t n = 0;
    for (const auto& [name, shape] : mf::models::parameter_shapes(c)) {
      bool drop = false;
      for (const std::string& s : skip) drop = drop || name.compare(0, s.size(), s) == 0;
      if (!drop) n += mf::shape_numel(shape);
    }
    return n;
  };
  // BertModel's count: the encoder with the pooler, no pretraining heads.
  EXPECT_EQ(params(mf::Config::load(dir + "bert_base.yaml", {}), {"cls."}), 109482240);
  EXPECT_EQ(params(mf::Config::load(dir + "bert_large.yaml", {}), {"cls."}), 335141888);
  EXPECT_EQ(params(mf::Config::load(dir + "roberta_base.yaml", {}), {"lm_head."}), 124645632 - 768 * 768 - 768);
  const mf::Config tiny = mf::Config::load(dir + "tiny.yaml", {});
  EXPECT_GT(params(tiny, {}), 0);
}

}  // namespace
