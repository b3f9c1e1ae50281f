// T5 (T5ForConditionalGeneration, v1.0: ReLU MLP, tied head; v1.1: gated-GELU MLP, untied lm_head)
// against a reference written independently in PyTorch from Hugging Face's conventions
// (scripts/make_t5_golden.py), on a padded batch (encoder rows of 10, 7 and 4 real tokens, decoder
// rows of 7, 5 and 3 labels), relative position buckets past the exact range included: the
// encoder's last hidden state, the logits, the loss and every parameter gradient, f64 (1e-9) and
// f32 (1e-5; gradients within PyTorch's own f32 accuracy on the same model).
#include <cstdio>

#include "golden_testing.h"
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

}  // namespace
