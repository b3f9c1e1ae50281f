// GPT-2 against a reference written independently in PyTorch (scripts/make_gpt2_golden.py):
// logits, loss and every parameter gradient, with dropout off; plus names/shapes and init.
#include <nlohmann/json.hpp>

#include "meshflow/core/atomic_file.h"
#include "meshflow/models/gpt2/model.h"
#include "testing.h"

namespace {
using namespace mft;
using json = nlohmann::json;

json golden() { return json::parse(mf::read_file(std::string(MESHFLOW_SOURCE_DIR) + "/tests/golden/gpt2_tiny.json")); }

mf::models::Gpt2Config tiny_config(const json& g, DType dt) {
  mf::models::Gpt2Config c;
  c.vocab_size = g["config"]["vocab_size"];
  c.max_seq_length = g["config"]["max_seq_length"];
  c.hidden_size = g["config"]["hidden_size"];
  c.num_layers = g["config"]["num_layers"];
  c.num_attention_heads = g["config"]["num_attention_heads"];
  c.embedding_dropout_prob = c.attention_dropout_prob = c.output_dropout_prob = 0.0;
  c.dtype = dt;
  return c;
}

Tensor ids_tensor(const json& rows) {
  std::vector<int64_t> v;
  for (auto& r : rows)
    for (auto& e : r) v.push_back(e.get<int64_t>());
  return mf::from_vector(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

void check_against_golden(DType dt, double rtol) {
  json g = golden();
  mf::models::Gpt2Model model(tiny_config(g, dt));
  mf::nn::NamedTensors state;
  for (auto& [name, t] : model.named_parameters()) {
    ASSERT_TRUE(g["weights"].contains(name)) << "no reference weight " << name;
    const json& w = g["weights"][name];
    ASSERT_EQ(t.shape(), w["shape"].get<mf::Shape>()) << name;
    state.emplace_back(name, mf::cast(mf::from_vector(w["data"].get<std::vector<double>>(), t.shape()), dt));
  }
  ASSERT_EQ(state.size(), g["weights"].size());
  model.load_state_dict(state);
  Tensor ids = ids_tensor(g["ids"]), labels = ids_tensor(g["labels"]);
  expect_rel_close(model.logits(ids), g["logits"].get<std::vector<double>>(), rtol, "logits");
  Tensor loss = model.loss(ids, labels);
  EXPECT_NEAR(loss.item(), g["loss"].get<double>(), rtol * g["loss"].get<double>());
  loss.backward();
  for (auto& [name, t] : model.named_parameters())
    expect_rel_close(t.grad(), g["grads"][name].get<std::vector<double>>(), rtol, "grad " + name);
}

TEST(Gpt2, MatchesPyTorchReferenceF64) { check_against_golden(DType::kF64, 1e-9); }
TEST(Gpt2, MatchesPyTorchReferenceF32) { check_against_golden(DType::kF32, 1e-5); }

TEST(Gpt2, HuggingFaceNamesAndInit) {
  mf::models::Gpt2Config c;
  c.vocab_size = 100;
  c.max_seq_length = 32;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_attention_heads = 4;
  mf::models::Gpt2Model m(c);
  m.init_weights(7);
  auto params = m.named_parameters();
  EXPECT_EQ(params.front().first, "transformer.wte.weight");
  EXPECT_EQ(params[2].first, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params[4].first, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(params[4].second.shape(), (mf::Shape{32, 96}));
  EXPECT_EQ(params.back().first, "transformer.ln_f.bias");
  for (auto& [name, t] : params) {
    std::vector<double> v = to_f64(t);
    double ss = 0;
    for (double e : v) ss += e * e;
    double sd = std::sqrt(ss / static_cast<double>(v.size()));
    if (name.find("c_proj.weight") != std::string::npos) {
      EXPECT_NEAR(sd, 0.02 / 2.0, 0.003) << name;
    } else if (name.find("c_attn.weight") != std::string::npos || name.find("wte") != std::string::npos) {
      EXPECT_NEAR(sd, 0.02, 0.003) << name;
    } else if (name.find("ln_1.weight") != std::string::npos) {
      EXPECT_EQ(sd, 1.0) << name;
    } else if (name.find(".bias") != std::string::npos) {
      EXPECT_EQ(sd, 0.0) << name;
    }
  }
  MFT_EXPECT_ERROR(
      [] {
        mf::models::Gpt2Config bad;
        bad.num_attention_heads = 5;
        mf::models::Gpt2Model m(bad);
      }(),
      "hidden_size 768", "not divisible");
}

}  // namespace
