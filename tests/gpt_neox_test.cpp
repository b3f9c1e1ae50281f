// GPT-NeoX (Pythia's parallel residual with a quarter of each head's features rotated, and a
// sequential-residual model rotating every feature) against a reference written independently in
// PyTorch from Hugging Face's conventions (scripts/make_gpt_neox_golden.py): logits, loss and every
// parameter gradient, f64 (1e-9) and f32 (1e-5; gradients within PyTorch's own f32 accuracy on the
// same model).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "meshflow/config/config.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/models/gpt_neox/model.h"
#include "meshflow/models/registry.h"
#include "golden_testing.h"

namespace {
using namespace mft;
using json = nlohmann::json;

json golden() { return golden_file("gpt_neox_tiny.json"); }

mf::models::GptNeoxConfig config_of(const json& g, DType dt) {
  mf::models::GptNeoxConfig c;
  c.vocab_size = g["vocab_size"];
  c.hidden_size = g["hidden_size"];
  c.num_layers = g["num_layers"];
  c.num_attention_heads = g["num_attention_heads"];
  c.ffn_hidden_size = g["ffn_hidden_size"];
  c.max_seq_length = g["max_seq_length"];
  c.layernorm_epsilon = g["layer_norm_eps"];
  c.rotary_pct = g["rotary_pct"];
  c.rope_theta = g["rope_theta"];
  c.use_parallel_residual = g["use_parallel_residual"];
  c.tie_word_embeddings = g["tie_word_embeddings"];
  c.settings.dtype = dt;
  return c;
}

// Logits, loss and every gradient of each case (golden_testing.h's causal-LM check).
void check_against_golden(DType dt, double rtol) {
  const json all = golden();
  ASSERT_EQ(all["cases"].size(), 2u);
  for (const json& g : all["cases"]) {
    mf::models::GptNeoxModel model(config_of(g["config"], dt));
    expect_causal_lm_matches_golden(model, g, dt, rtol);
  }
}

TEST(GptNeox, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(GptNeox, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

// Selective and full recomputation give the plain step's loss and gradients bit for bit.
TEST(GptNeox, RecomputationIsExact) {
  const json g = golden()["cases"][0];
  expect_recomputation_exact<mf::models::GptNeoxModel>(config_of(g["config"], DType::kF64), g);
}

// Hugging Face's names and order, its initialisation (GPTNeoXPreTrainedModel._init_weights:
// Linear and Embedding weights N(0, initializer_range), biases 0, LayerNorm weight 1 and bias 0),
// and the errors of a bad config and an overlong sequence.
TEST(GptNeox, NamesInitAndErrors) {
  mf::models::GptNeoxConfig c = config_of(golden()["cases"][0]["config"], DType::kF32);  // pythia
  mf::models::GptNeoxModel m(c);
  m.init_weights(7);
  auto params = m.named_parameters();
  ASSERT_GE(params.size(), 6u);
  EXPECT_EQ(params[0].first, "gpt_neox.embed_in.weight");
  EXPECT_EQ(params[1].first, "gpt_neox.layers.0.input_layernorm.weight");
  EXPECT_EQ(params[2].first, "gpt_neox.layers.0.input_layernorm.bias");
  EXPECT_EQ(params[3].first, "gpt_neox.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(params[4].first, "gpt_neox.layers.0.post_attention_layernorm.bias");
  EXPECT_EQ(params[5].first, "gpt_neox.layers.0.attention.query_key_value.weight");
  EXPECT_EQ(params.back().first, "embed_out.weight");  // untied
  EXPECT_TRUE(m.tied_parameters().empty());
  for (auto& [name, t] : params) {
    const std::vector<double> v = to_f64(t);
    double ss = 0;
    for (double e : v) ss += e * e;
    const double sd = std::sqrt(ss / static_cast<double>(v.size()));
    const bool norm_weight = name.find("layernorm.weight") != std::string::npos ||
                             name.find("layer_norm.weight") != std::string::npos;
    if (norm_weight) EXPECT_EQ(sd, 1.0) << name;
    else if (name.find(".bias") != std::string::npos) EXPECT_EQ(sd, 0.0) << name;
    else EXPECT_NEAR(sd, 0.02, 0.004) << name;
  }
  mf::models::GptNeoxConfig bad = c;
  bad.num_attention_heads = 3;  // does not divide hidden_size 32
  MFT_EXPECT_ERROR(mf::models::GptNeoxModel{bad}, "model.num_attention_heads");
  MFT_EXPECT_ERROR(m.loss(mf::zeros({1, 17}, DType::kI64), mf::zeros({1, 17}, DType::kI64)), "sequence length 17",
                   "model.max_seq_length = 16");
}

// The shipped real-size config describes the published model: EleutherAI/pythia-160m's parameter
// count (vocab 50304, hidden 768, 12 layers, intermediate 3072, untied embed_out without bias,
// biases on every Linear, LayerNorms with bias):
//   embed_in 50304 * 768                                   =  38,633,472
//   embed_out 50304 * 768                                  =  38,633,472
//   per layer: 2 LayerNorms 2 * (768 + 768)                =       3,072
//              query_key_value 768 * 2304 + 2304           =   1,771,776
//              dense 768 * 768 + 768                       =     590,592
//              dense_h_to_4h 768 * 3072 + 3072             =   2,362,368
//              dense_4h_to_h 3072 * 768 + 768              =   2,360,064
//              together                                    =   7,087,872
//   12 layers 12 * 7,087,872                               =  85,054,464
//   final_layer_norm 768 + 768                             =       1,536
//   total 38,633,472 * 2 + 85,054,464 + 1,536              = 162,322,944
// And the tiny config loads.
TEST(GptNeox, ShippedConfigsHaveThePublishedParameterCounts) {
  const std::string dir = std::string(MESHFLOW_SOURCE_DIR) + "/configs/gpt_neox/";
  const std::vector<std::pair<std::string, int64_t>> want = {{"pythia_160m", 162322944}};
  for (const auto& [file, n] : want) {
    const mf::Config c = mf::Config::load(dir + file + ".yaml", {});
    int64_t total = 0;
    for (const auto& [name, shape] : mf::models::parameter_shapes(c))
      total += mf::shape_numel(shape);
    EXPECT_EQ(total, n) << file;
  }
  const mf::Config tiny = mf::Config::load(dir + "tiny.yaml", {});
  EXPECT_EQ(tiny.get_string("model.name"), "gpt_neox");
  EXPECT_EQ(tiny.get_string("data.data_prefix"), "data/fortunes_text_document");
}

}  // namespace
