// The Llama family (Llama with grouped-query attention and Llama 3.1 rope scaling, Qwen2 with
// q/k/v biases and a tied head, Mistral with a sliding window shorter than the sequence) against a
// reference written independently in PyTorch from Hugging Face's conventions
// (scripts/make_llama_golden.py): logits, loss and every parameter gradient, f64 (1e-9) and f32
// (1e-5; gradients within PyTorch's own f32 accuracy on the same model).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "meshflow/config/config.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/models/llama/model.h"
#include "meshflow/models/registry.h"
#include "golden_testing.h"

namespace {
using namespace mft;
using json = nlohmann::json;

json golden() { return golden_file("llama_tiny.json"); }

mf::models::LlamaConfig config_of(const json& g, DType dt) {
  using mf::models::LlamaVariant;
  mf::models::LlamaConfig c;
  const std::string name = g["name"];
  c.variant = name == "qwen2" ? LlamaVariant::kQwen2 : name == "mistral" ? LlamaVariant::kMistral : LlamaVariant::kLlama;
  c.vocab_size = g["vocab_size"];
  c.hidden_size = g["hidden_size"];
  c.num_layers = g["num_layers"];
  c.num_attention_heads = g["num_attention_heads"];
  c.num_key_value_heads = g["num_key_value_heads"];
  c.ffn_hidden_size = g["ffn_hidden_size"];
  c.max_seq_length = g["max_seq_length"];
  c.layernorm_epsilon = g["rms_norm_eps"];
  c.rope_theta = g["rope_theta"];
  if (!g["llama3"].is_null()) {
    c.llama3_rope = true;
    c.rope_scaling.factor = g["llama3"]["factor"];
    c.rope_scaling.low_freq_factor = g["llama3"]["low_freq_factor"];
    c.rope_scaling.high_freq_factor = g["llama3"]["high_freq_factor"];
    c.rope_scaling.original_max_position_embeddings = g["llama3"]["original_max_position_embeddings"];
  }
  c.tie_word_embeddings = g["tie_word_embeddings"];
  c.qkv_bias = g["qkv_bias"];
  c.sliding_window = g["sliding_window"];
  c.settings.dtype = dt;
  return c;
}

// Logits, loss and every gradient of each case (golden_testing.h's causal-LM check).
void check_against_golden(DType dt, double rtol) {
  const json all = golden();
  ASSERT_EQ(all["cases"].size(), 3u);
  for (const json& g : all["cases"]) {
    mf::models::LlamaModel model(config_of(g["config"], dt));
    expect_causal_lm_matches_golden(model, g, dt, rtol);
  }
}

TEST(Llama, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(Llama, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

// Selective and full recomputation give the plain step's loss and gradients bit for bit.
TEST(Llama, RecomputationIsExact) {
  const json g = golden()["cases"][0];
  expect_recomputation_exact<mf::models::LlamaModel>(config_of(g["config"], DType::kF64), g);
}

TEST(Llama, NamesInitAndErrors) {
  mf::models::LlamaConfig c = config_of(golden()["cases"][1]["config"], DType::kF32);  // qwen2: biases, tied
  mf::models::LlamaModel m(c);
  m.init_weights(7);
  auto params = m.named_parameters();
  EXPECT_EQ(params.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(params[2].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(params[3].first, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(params.back().first, "model.norm.weight");  // tied: no lm_head.weight
  EXPECT_EQ(m.tied_parameters(), std::vector<std::string>{"model.embed_tokens.weight"});
  for (auto& [name, t] : params) {
    const std::vector<double> v = to_f64(t);
    double ss = 0;
    for (double e : v) ss += e * e;
    const double sd = std::sqrt(ss / static_cast<double>(v.size()));
    if (name.find("norm.weight") != std::string::npos) EXPECT_EQ(sd, 1.0) << name;
    else if (name.find(".bias") != std::string::npos) EXPECT_EQ(sd, 0.0) << name;
    else EXPECT_NEAR(sd, 0.02, 0.004) << name;
  }
  mf::models::LlamaConfig bad = c;
  bad.num_key_value_heads = 3;
  MFT_EXPECT_ERROR(mf::models::LlamaModel{bad}, "model.num_key_value_heads 3", "must divide");
  MFT_EXPECT_ERROR(m.loss(mf::zeros({1, 17}, DType::kI64), mf::zeros({1, 17}, DType::kI64)), "sequence length 17",
                   "model.max_seq_length = 16");
}

// The shipped real-size configs describe the published models: their parameter counts (Hugging
// Face's model cards: Llama-2-7B 6,738,415,616; Meta-Llama-3-8B 8,030,261,248; Qwen2-0.5B
// 494,032,768 with its tied head; Mistral-7B-v0.1 7,241,732,096), and the tiny config loads.
TEST(Llama, ShippedConfigsHaveThePublishedParameterCounts) {
  const std::string dir = std::string(MESHFLOW_SOURCE_DIR) + "/configs/llama/";
  const std::vector<std::pair<std::string, int64_t>> want = {{"llama2_7b", 6738415616},
                                                             {"llama3_8b", 8030261248},
                                                             {"qwen2_0.5b", 494032768},
                                                             {"mistral_7b", 7241732096}};
  for (const auto& [file, n] : want) {
    const mf::Config c = mf::Config::load(dir + file + ".yaml", {});
    int64_t total = 0;
    for (const auto& [name, shape] : mf::models::parameter_shapes(c))
      total += mf::shape_numel(shape);
    EXPECT_EQ(total, n) << file;
  }
  const mf::Config tiny = mf::Config::load(dir + "tiny.yaml", {});
  EXPECT_EQ(tiny.get_string("model.name"), "llama");
  EXPECT_EQ(tiny.get_int("model.num_key_value_heads"), 2);
  EXPECT_EQ(tiny.get_string("data.data_prefix"), "data/fortunes_text_document");
}

}  // namespace
